package netperf

import (
	"fmt"
	"strconv"
	"strings"
)

// TOS is an IP TOS byte (IPv6 traffic class) asked for with netperf's -Y;
// Set false leaves the socket's own.
type TOS struct {
	Value uint8
	Set   bool
}

// output is the TOS as stock's omni output prints it ("0x%.2x" of -1 when
// unset).
func (t TOS) output() string {
	if !t.Set {
		return unsetTOS
	}
	return fmt.Sprintf("0x%.2x", t.Value)
}

// wire is the TOS as the omni request carries it (-1: unset).
func (t TOS) wire() int32 {
	if !t.Set {
		return -1
	}
	return int32(t.Value)
}

// ipQoS are the names stock's parse_ipqos (dscp.c, from OpenSSH) knows: the
// RFC 2474 DiffServ code points as TOS bytes and the RFC 1349 TOS bits.
var ipQoS = map[string]uint8{
	"af11": 0x28, "af12": 0x30, "af13": 0x38, "af21": 0x48, "af22": 0x50, "af23": 0x58,
	"af31": 0x68, "af32": 0x70, "af33": 0x78, "af41": 0x88, "af42": 0x90, "af43": 0x98,
	"cs0": 0x00, "cs1": 0x20, "cs2": 0x40, "cs3": 0x60, "cs4": 0x80, "cs5": 0xa0, "cs6": 0xc0, "cs7": 0xe0,
	"ef": 0xb8, "lowdelay": 0x10, "throughput": 0x08, "reliability": 0x04,
}

// ParseTOS reads one side of -Y as stock's parse_ipqos does: a name of
// ipQoS in any case, or a number 0..255 (decimal, 0x hex or 0 octal).
func ParseTOS(s string) (TOS, error) {
	if v, ok := ipQoS[strings.ToLower(s)]; ok {
		return TOS{Value: v, Set: true}, nil
	}
	v, err := strconv.ParseInt(s, 0, 16)
	if err != nil || v < 0 || v > 255 {
		return TOS{}, fmt.Errorf("TOS %q: want a DSCP name (CS0..CS7, AF11..AF43, EF), lowdelay, throughput, reliability or 0..255", s)
	}
	return TOS{Value: uint8(v), Set: true}, nil
}
