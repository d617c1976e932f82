package netperf

import (
	"crypto/rand"
	"fmt"
	"sync"
)

// uname is what uname(2) says about this host (LOCAL_SYSNAME and the
// like); empty fields where the system cannot tell.
type uname struct{ sysname, release, version, machine string }

// localUname returns this host's uname, read once.
var localUname = sync.OnceValue(readUname)

// newUUID returns a random (version 4, RFC 9562) UUID in its text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
