package plc

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
)

// Quiet sends the standard log package's output to io.Discard. The gopcua
// server prints through the standard logger and offers no way to stop it
// ("New Node Set: ...", "doing objects.", "Started listening on [...]" at
// every start). This changes the process-wide standard logger, so call it
// only from a main or a TestMain that owns the process.
func Quiet() { log.SetOutput(io.Discard) }

// gopcuaLogger adapts a slog.Logger to the gopcua server's Logger. The
// server passes printf templates with their arguments and uses Error for
// routine events (dozens of "Duplicate reference type" lines at each start,
// "socket closed" at each Close), so every line goes out at Debug with the
// formatted text and the level gopcua gave it.
type gopcuaLogger struct{ l *slog.Logger }

func (g gopcuaLogger) log(level, msg string, args []any) {
	if !g.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	g.l.Debug("gopcua server", "gopcua_level", level, "text", fmt.Sprintf(msg, args...))
}

func (g gopcuaLogger) Debug(msg string, args ...any) { g.log("debug", msg, args) }
func (g gopcuaLogger) Info(msg string, args ...any)  { g.log("info", msg, args) }
func (g gopcuaLogger) Warn(msg string, args ...any)  { g.log("warn", msg, args) }
func (g gopcuaLogger) Error(msg string, args ...any) { g.log("error", msg, args) }
