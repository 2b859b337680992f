package plc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropConns shuts down, in both directions, every TCP connection this
// process accepted on port, and returns how many. The gopcua server never
// closes an accepted connection itself (its Close only sends the client a
// CloseSecureChannel message and then waits up to 10s for the client to
// hang up), so without this a client stays connected to a stopped server
// and the server's reading goroutine leaks. The connections are found
// through /proc: sockets whose local port is port, matched by inode to
// this process's file descriptors. Shutdown wakes the blocked reader with
// EOF and sends the client a FIN; the descriptor itself stays gopcua's.
func dropConns(port int) int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		acceptedOn(f, port, inodes)
	}
	if len(inodes) == 0 {
		return 0
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range fds {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if !inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if syscall.Shutdown(fd, syscall.SHUT_RDWR) == nil {
			n++
		}
	}
	return n
}

// acceptedOn adds to inodes the sockets in a /proc/net/tcp table whose
// local port is port and that are not listening.
func acceptedOn(table string, port int, inodes map[string]bool) {
	f, err := os.Open(table)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] == "0A" { // 0A: LISTEN
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || int(p) != port || fields[9] == "0" {
			continue
		}
		inodes[fields[9]] = true
	}
}
