package modbus

// CRC16 is CRC-16/MODBUS of b: polynomial 0x8005 reflected (0xA001),
// initial value 0xFFFF, no final XOR. A frame carries it low byte first.
func CRC16(b []byte) uint16 {
	c := uint16(0xFFFF)
	for _, x := range b {
		c = c>>8 ^ crcTable[byte(c)^x]
	}
	return c
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// appendCRC appends the CRC of b, low byte first.
func appendCRC(b []byte) []byte {
	c := CRC16(b)
	return append(b, byte(c), byte(c>>8))
}
