#!/bin/sh
# package.sh tar VERSION DIR ARCH...    DIR/shadowgate-VERSION-linux-ARCH.tar.gz
# package.sh deb DEBVERSION DIR ARCH... DIR/shadowgate_DEBVERSION_ARCH.deb
#
# Each takes the binary DIR/shadowgate-linux-ARCH (the Makefile builds it),
# and both then write DIR/SHA256SUMS over every archive and package in DIR.
# With SOURCE_DATE_EPOCH set (the Makefile sets the last commit's time),
# two runs on the same binaries give the same bytes.
set -eu
umask 022

top=$(cd "$(dirname "$0")/.." && pwd)
kind=$1 version=$2 dir=$3
shift 3
: "${SOURCE_DATE_EPOCH:=0}"
export SOURCE_DATE_EPOCH

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"

# tarball ARCH: the binary, the systemd files, the packaged configuration
# and the README, under one directory named like the archive.
tarball() {
	name=shadowgate-$version-linux-$1
	d=$stage/$name
	install -D -m 0755 "$dir/shadowgate-linux-$1" "$d/shadowgate"
	install -D -m 0644 "$top/systemd/shadowgate.service" "$d/systemd/shadowgate.service"
	install -m 0644 "$top/systemd/shadowgate.sysusers" "$top/systemd/shadowgate.tmpfiles" "$d/systemd/"
	install -m 0644 "$top/examples/packaged.yaml" "$d/shadowgate.yaml"
	install -m 0644 "$top/packaging/README" "$d/README"
	tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" | gzip -9n >"$dir/$name.tar.gz"
}

# deb ARCH: the tree of the package, then dpkg-deb. The directory modes and
# the maintainer scripts' 0755 matter: dpkg-deb refuses anything else.
deb() {
	r=$stage/deb-$1
	install -D -m 0755 "$dir/shadowgate-linux-$1" "$r/usr/bin/shadowgate"
	install -D -m 0644 "$top/systemd/shadowgate.service" "$r/lib/systemd/system/shadowgate.service"
	install -D -m 0644 "$top/systemd/shadowgate.sysusers" "$r/usr/lib/sysusers.d/shadowgate.conf"
	install -D -m 0644 "$top/systemd/shadowgate.tmpfiles" "$r/usr/lib/tmpfiles.d/shadowgate.conf"
	install -D -m 0640 "$top/examples/packaged.yaml" "$r/etc/shadowgate/shadowgate.yaml"
	chmod 0750 "$r/etc/shadowgate"
	install -D -m 0644 "$top/packaging/README" "$r/usr/share/doc/shadowgate/README"
	install -d -m 0755 "$r/DEBIAN"
	for s in postinst prerm postrm; do
		install -m 0755 "$top/packaging/debian/$s" "$r/DEBIAN/$s"
	done
	echo /etc/shadowgate/shadowgate.yaml >"$r/DEBIAN/conffiles"
	size=$(du -sk --exclude=DEBIAN "$r" | cut -f1)
	sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$1/" -e "s/@SIZE@/$size/" \
		"$top/packaging/debian/control" >"$r/DEBIAN/control"
	dpkg-deb --build --root-owner-group -Zxz "$r" "$dir/shadowgate_${version}_$1.deb" >/dev/null
}

case $kind in
tar | deb) ;;
*)
	echo "usage: package.sh tar|deb VERSION DIR ARCH..." >&2
	exit 1
	;;
esac
for arch in "$@"; do
	if [ "$kind" = tar ]; then tarball "$arch"; else deb "$arch"; fi
done
(
	cd "$dir"
	set -- shadowgate-*.tar.gz shadowgate_*.deb
	for f in "$@"; do [ -e "$f" ] && echo "$f"; done | xargs -r sha256sum >SHA256SUMS
)
