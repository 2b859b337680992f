// Package failpoint places named faults on the durable steps of the write
// path, for crash tests. A failpoint is compiled in only with the build tag
// failpoints: in every other build Inject is an empty function that the
// compiler inlines and removes, with its name, so the shipped binary holds
// no failpoint and reads no environment for one (a test in cmd/shadowgate
// checks the binary for the names).
//
// With the tag, a process arms failpoints from its environment:
//
//	SHADOWGATE_FAILPOINTS='act:after-executing=exit(86)'
//	SHADOWGATE_FAILPOINTS='journal:commit:before-write=error(disk on fire)@3;act:after-driver=sleep(2s)'
//
// Each term is name=action, terms are separated by ";". An action is
// panic, panic(message), exit(code), error(message) or sleep(duration); a
// suffix @N fires it only on the Nth hit of its point (counted from 1),
// and not at all before or after. An unknown name or a malformed action is
// a panic at the first Inject, so that a typo never passes for a point that
// was not reached. With SHADOWGATE_FAILPOINTS_ARM naming a file, hits are
// neither counted nor fired until that file exists: a test starts the
// binary, lets it settle, creates the file and then sends the request it
// means to crash.
//
// A point that fires writes one line to stderr before acting:
//
//	failpoint act:after-executing fired: exit(86) (hit 1)
//
// An error action makes Inject return a *Error; each point's doc says what
// the step does with it. A panic inside a journal transaction is caught by
// the journal, as bbolt's own panics on damaged pages are, and becomes a
// write error: use exit to crash there.
package failpoint
