//go:build linux

package systemd_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// makeDebVersion is the Makefile's DEBVERSION for a given VERSION.
func makeDebVersion(t *testing.T, mk, version string) string {
	t.Helper()
	return strings.TrimSpace(run(t, nil, mk, "-s", "-C", "..", "VERSION="+version,
		"--eval", "print-debversion: ; @echo $(DEBVERSION)", "print-debversion"))
}

// TestDebVersion checks how the Makefile turns git describe into a Debian
// version: dpkg accepts each, and they sort as the releases do.
func TestDebVersion(t *testing.T) {
	mk := needTool(t, "make", "make")
	dpkg := needTool(t, "dpkg", "dpkg")
	cases := []struct{ describe, want string }{ // in release order
		{"b0dadd5-dirty", "0.0.0+git.b0dadd5~dirty"},
		{"b0dadd5", "0.0.0+git.b0dadd5"},
		{"v0.2.9", "0.2.9"},
		{"v0.3.0-dirty", "0.3.0~dirty"},
		{"v0.3.0", "0.3.0"},
		{"v0.3.0-9-g1234567", "0.3.0+9.g1234567"},
		{"v0.3.0-12-gabc1234-dirty", "0.3.0+12.gabc1234~dirty"},
		{"v0.3.0-12-gabc1234", "0.3.0+12.gabc1234"},
		{"v0.4.0-rc.1", "0.4.0~rc.1"},
		{"v0.4.0-rc.1-3-gdeadbee", "0.4.0~rc.1+3.gdeadbee"},
		{"v0.4.0", "0.4.0"},
	}
	for i, tc := range cases {
		got := makeDebVersion(t, mk, tc.describe)
		if got != tc.want {
			t.Errorf("DEBVERSION for VERSION=%s = %q, want %q", tc.describe, got, tc.want)
			continue
		}
		run(t, nil, dpkg, "--validate-version", got)
		if i > 0 {
			if err := exec.Command(dpkg, "--compare-versions", cases[i-1].want, "lt", got).Run(); err != nil {
				t.Errorf("dpkg does not sort %s before %s", cases[i-1].want, got)
			}
		}
	}
}

// debArch is the Debian architecture of the machine running the test: the
// package is installed and its binary run here.
func debArch(t *testing.T) string {
	switch goruntime.GOARCH {
	case "amd64", "arm64":
		return goruntime.GOARCH
	case "arm":
		return "armhf"
	}
	t.Skipf("no Debian package is built for GOARCH %s", goruntime.GOARCH)
	return ""
}

// TestDeb builds the package for this machine with make deb, checks its
// fields and files with dpkg-deb, and then installs, upgrades, removes and
// purges it in a scratch root with dpkg --root (as root only).
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped under -short")
	}
	mk := needTool(t, "make", "make")
	dpkgDeb := needTool(t, "dpkg-deb", "dpkg")
	arch := debArch(t)
	dist := t.TempDir()
	run(t, nil, mk, "-s", "-C", "..", "deb", "DIST="+dist, "DEBS="+arch)

	// The version is the one the binary prints, as the Makefile maps it.
	bin := filepath.Join(dist, "shadowgate-linux-"+arch)
	stamped, ok := strings.CutPrefix(strings.TrimSpace(run(t, nil, bin, "version")), "shadowgate ")
	if !ok {
		t.Fatalf("%s version printed no version", bin)
	}
	version := makeDebVersion(t, mk, stamped)
	deb := filepath.Join(dist, "shadowgate_"+version+"_"+arch+".deb")
	if _, err := os.Stat(deb); err != nil {
		t.Fatalf("make deb did not make the package of %s (%s): %v", stamped, version, err)
	}
	if fi, _ := os.Stat(deb); fi != nil {
		t.Logf("%s: %d bytes", filepath.Base(deb), fi.Size())
	}

	for field, want := range map[string]string{"Package": "shadowgate", "Version": version, "Architecture": arch} {
		if got := strings.TrimSpace(run(t, nil, dpkgDeb, "--field", deb, field)); got != want {
			t.Errorf("%s: %s %q, want %q", deb, field, got, want)
		}
	}
	if size, err := strconv.Atoi(strings.TrimSpace(run(t, nil, dpkgDeb, "--field", deb, "Installed-Size"))); err != nil || size < 1024 {
		t.Errorf("Installed-Size %d (%v), want the size in KiB", size, err)
	}
	info := run(t, nil, dpkgDeb, "--info", deb)
	for _, member := range []string{"conffiles", "control", "postinst", "prerm", "postrm"} {
		if !strings.Contains(info, " "+member) {
			t.Errorf("dpkg-deb --info lists no %s:\n%s", member, info)
		}
	}
	if got := run(t, nil, dpkgDeb, "--info", deb, "conffiles"); got != "/etc/shadowgate/shadowgate.yaml\n" {
		t.Errorf("conffiles = %q, want the configuration alone", got)
	}
	checkContents(t, run(t, nil, dpkgDeb, "--contents", deb))

	// What is unpacked is what the repository holds.
	x := t.TempDir()
	run(t, nil, dpkgDeb, "-x", deb, x)
	for in, repo := range map[string]string{
		"lib/systemd/system/shadowgate.service": "shadowgate.service",
		"usr/lib/sysusers.d/shadowgate.conf":    "shadowgate.sysusers",
		"usr/lib/tmpfiles.d/shadowgate.conf":    "shadowgate.tmpfiles",
		"etc/shadowgate/shadowgate.yaml":        "../examples/packaged.yaml",
	} {
		a, errA := os.ReadFile(filepath.Join(x, in))
		b, errB := os.ReadFile(repo)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("/%s in the package differs from %s (%v, %v)", in, repo, errA, errB)
		}
	}

	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil || !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+filepath.Base(deb)+"\n") {
		t.Errorf("SHA256SUMS (%v) has no line for %s:\n%s", err, filepath.Base(deb), sums)
	}

	t.Run("dpkg --root", func(t *testing.T) { installInScratchRoot(t, deb) })
	t.Run("postinst without systemd", func(t *testing.T) { postinstWithoutSystemd(t, deb) })
}

// checkContents compares the package's files, their modes and owners, with
// what the package must hold.
func checkContents(t *testing.T, contents string) {
	t.Helper()
	want := map[string]string{
		"./usr/bin/shadowgate":                    "-rwxr-xr-x",
		"./lib/systemd/system/shadowgate.service": "-rw-r--r--",
		"./usr/lib/sysusers.d/shadowgate.conf":    "-rw-r--r--",
		"./usr/lib/tmpfiles.d/shadowgate.conf":    "-rw-r--r--",
		"./usr/share/doc/shadowgate/README":       "-rw-r--r--",
		"./etc/shadowgate/":                       "drwxr-x---",
		"./etc/shadowgate/shadowgate.yaml":        "-rw-r-----",
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(contents), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Errorf("dpkg-deb --contents: %q", line)
			continue
		}
		mode, owner, path := f[0], f[1], f[5]
		if owner != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", path, owner)
		}
		if strings.HasPrefix(path, "./var/") {
			t.Errorf("%s is in the package; the state directory is made on the machine and kept on purge", path)
		}
		if mode[0] != 'd' || want[path] != "" {
			got[path] = mode
		}
	}
	for path, mode := range want {
		if got[path] != mode {
			t.Errorf("%s: mode %q, want %q", path, got[path], mode)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("%s is in the package and should not be", path)
		}
	}
}

// scratchRoot is an empty root with a dpkg database.
func scratchRoot(t *testing.T) string {
	t.Helper()
	r := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// needRoot skips a test that changes owners: dpkg and the maintainer
// scripts chown, and useradd chroots. CI runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("installing the package needs root (dpkg and the maintainer scripts change owners); skipping")
	}
}

// installInScratchRoot installs the package with dpkg --root. With
// --force-script-chrootless dpkg runs the maintainer scripts on this
// machine with DPKG_ROOT set to the scratch root, and every command in
// them works inside DPKG_ROOT; without it dpkg would chroot into a root
// that has no /bin/sh.
func installInScratchRoot(t *testing.T, deb string) {
	needRoot(t)
	dpkg := needTool(t, "dpkg", "dpkg")
	r := scratchRoot(t)
	dpkgRun := func(env []string, args ...string) string {
		t.Helper()
		return run(t, env, dpkg, append([]string{"--root=" + r, "--log=" + filepath.Join(r, "dpkg.log"), "--force-script-chrootless"}, args...)...)
	}
	clean := func(what, out string) {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "Failed") || strings.Contains(line, "ignoring") || strings.Contains(line, "error") {
				t.Errorf("%s: %s", what, line)
			}
		}
	}

	out := dpkgRun(nil, "--install", deb)
	clean("install", out)
	if !strings.Contains(out, "installed, not enabled") {
		t.Errorf("install did not say the service is left disabled:\n%s", out)
	}
	if status := run(t, nil, dpkg, "--root="+r, "--status", "shadowgate"); !strings.Contains(status, "Status: install ok installed") {
		t.Errorf("after install:\n%s", status)
	}
	uid, gid := account(t, r)
	checkOwner(t, r, "etc/shadowgate", 0o750|fs.ModeDir, 0, gid)
	checkOwner(t, r, "etc/shadowgate/shadowgate.yaml", 0o640, 0, gid)
	checkOwner(t, r, "var/lib/shadowgate", 0o700|fs.ModeDir, uid, gid)
	if links, _ := filepath.Glob(filepath.Join(r, "etc/systemd/system/*.wants/shadowgate.service")); len(links) > 0 {
		t.Errorf("install enabled the service: %v", links)
	}
	conffile := filepath.Join(r, "etc/shadowgate/shadowgate.yaml")
	if out := run(t, nil, filepath.Join(r, "usr/bin/shadowgate"), "check", "--config", conffile); !strings.Contains(out, "ok (") {
		t.Errorf("shadowgate check on the installed configuration: %s", out)
	}

	// An operator's edit survives an upgrade (here to the same version),
	// and the upgrade puts the modes back.
	f, err := os.OpenFile(conffile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("# edited on the machine\n")
	f.Close()
	os.Chmod(conffile, 0o644)
	clean("upgrade", dpkgRun(nil, "--install", deb))
	if b, _ := os.ReadFile(conffile); !bytes.HasSuffix(b, []byte("# edited on the machine\n")) {
		t.Error("the upgrade replaced the edited configuration")
	}
	checkOwner(t, r, "etc/shadowgate/shadowgate.yaml", 0o640, 0, gid)

	// A journal the gateway wrote. Remove keeps it and the configuration;
	// purge removes the configuration and keeps the journal.
	journal := filepath.Join(r, "var/lib/shadowgate/shadowgate.db")
	if err := os.WriteFile(journal, []byte("journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	clean("remove", dpkgRun(nil, "--remove", "shadowgate"))
	for _, p := range []string{conffile, journal} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after remove: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(r, "usr/bin/shadowgate")); err == nil {
		t.Error("after remove the binary is still there")
	}
	out = dpkgRun(nil, "--purge", "shadowgate")
	if _, err := os.Stat(conffile); err == nil {
		t.Error("after purge the configuration is still there")
	}
	if _, err := os.Stat(journal); err != nil || !strings.Contains(out, "kept /var/lib/shadowgate") {
		t.Errorf("purge did not keep the journal and say so (%v):\n%s", err, out)
	}

	// Asked to, purge removes the state directory too.
	dpkgRun(nil, "--install", deb)
	dpkgRun([]string{"SHADOWGATE_PURGE_STATE=yes"}, "--purge", "shadowgate")
	if _, err := os.Stat(filepath.Join(r, "var/lib/shadowgate")); err == nil {
		t.Error("purge with SHADOWGATE_PURGE_STATE=yes kept /var/lib/shadowgate")
	}
}

// postinstWithoutSystemd runs the package's postinst, unpacked with
// dpkg-deb, against a scratch root on a PATH without systemd-sysusers,
// systemd-tmpfiles, deb-systemd-helper or systemctl: it must fall back to
// groupadd, useradd and plain chown and chmod.
func postinstWithoutSystemd(t *testing.T, deb string) {
	needRoot(t)
	dpkgDeb := needTool(t, "dpkg-deb", "dpkg")
	needTool(t, "useradd", "passwd")
	r := t.TempDir()
	run(t, nil, dpkgDeb, "-x", deb, r)
	control := t.TempDir()
	run(t, nil, dpkgDeb, "-e", deb, control)
	for name, text := range map[string]string{
		"passwd":  "root:x:0:0:root:/root:/bin/sh\n",
		"group":   "root:x:0:\n",
		"shadow":  "root:*:19000:0:99999:7:::\n",
		"gshadow": "root:*::\n",
	} {
		if err := os.WriteFile(filepath.Join(r, "etc", name), []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// A PATH of links to every command here but the systemd ones.
	bin := t.TempDir()
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			switch n := e.Name(); {
			case strings.HasPrefix(n, "systemd-"), n == "systemctl", n == "deb-systemd-helper", n == "deb-systemd-invoke":
			default:
				os.Symlink(filepath.Join(d, n), filepath.Join(bin, n)) // the first one found wins
			}
		}
	}
	cmd := exec.CommandContext(t.Context(), "/bin/sh", filepath.Join(control, "postinst"), "configure", "")
	cmd.Env = []string{"PATH=" + bin, "DPKG_ROOT=" + r}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("postinst: %v\n%s", err, out)
	}
	uid, gid := account(t, r)
	checkOwner(t, r, "etc/shadowgate", 0o750|fs.ModeDir, 0, gid)
	checkOwner(t, r, "etc/shadowgate/shadowgate.yaml", 0o640, 0, gid)
	checkOwner(t, r, "var/lib/shadowgate", 0o700|fs.ModeDir, uid, gid)
	if group, _ := os.ReadFile(filepath.Join(r, "etc/group")); !bytes.Contains(group, []byte("\ngpio:")) {
		t.Errorf("postinst made no gpio group:\n%s", group)
	}
}

// account returns the shadowgate user's uid and gid in root r, checking
// its home is the state directory.
func account(t *testing.T, r string) (uid, gid int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == "shadowgate" {
			if f[5] != "/var/lib/shadowgate" {
				t.Errorf("the shadowgate user's home is %s, want /var/lib/shadowgate", f[5])
			}
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			if uid == 0 || gid == 0 {
				t.Fatalf("the shadowgate user is %q", line)
			}
			return uid, gid
		}
	}
	t.Fatalf("no shadowgate user in %s/etc/passwd:\n%s", r, b)
	return 0, 0
}

func checkOwner(t *testing.T, r, p string, mode fs.FileMode, uid, gid int) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(r, p))
	if err != nil {
		t.Error(err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode() != mode || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("/%s: %v %d:%d, want %v %d:%d", p, fi.Mode(), st.Uid, st.Gid, mode, uid, gid)
	}
}
