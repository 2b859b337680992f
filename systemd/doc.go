// Package systemd holds no code: its directory carries Shadowgate's
// systemd files (shadowgate.service, shadowgate.sysusers and
// shadowgate.tmpfiles), and its tests check them with systemd-analyze and
// check the Debian package that `make deb` builds from them.
package systemd
