//go:build !shadowgate_omit_opcua

package gateway

import (
	_ "github.com/shadowgate/shadowgate/drivers/opcua" // OPC UA servers (PLCs) through gopcua's client
)
