package stack

import (
	"errors"

	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// openTAP opens the TAP lower link for l.
func openTAP(l Link) (gstack.LinkEndpoint, error) {
	return nil, errors.New("TAP links are not available in this build yet (link/tap)")
}
