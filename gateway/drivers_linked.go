package gateway

// The drivers this build has. Each registers its type from its init; a
// configuration names them by type, and nothing else in gateway names a
// driver. OPC-UA's is in drivers_opcua.go, which the tag
// shadowgate_omit_opcua leaves out.
import (
	_ "github.com/shadowgate/shadowgate/drivers/gpio"          // GPIO lines through periph.io (the character device first)
	_ "github.com/shadowgate/shadowgate/drivers/serial/line"   // a microcontroller speaking the line protocol
	_ "github.com/shadowgate/shadowgate/drivers/serial/modbus" // Modbus RTU units on a serial line (RS-485)
	_ "github.com/shadowgate/shadowgate/drivers/sim"           // the simulated greenhouse: the demo and most tests
)
