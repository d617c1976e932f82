package netperf

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// filler fills the client's data buffers: from the -F file as stock's
// allocate_buffer_ring does (each buffer read in turn from the file, which
// is read again from its start at its end), or, without a file, with
// netperf's default pattern. A nil *filler uses the pattern.
type filler struct {
	f    *os.File
	name string
}

// openFiller opens the -F file name; "" gives the default pattern.
func openFiller(name string) (*filler, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("netperf: -F: could not open requested fill file: %w", err)
	}
	return &filler{f: f, name: name}, nil
}

// fill fills b. A file that reads nothing even from its start (empty)
// leaves the rest of b in the default pattern rather than loop forever.
func (fl *filler) fill(b []byte) {
	fillPattern(b)
	if fl == nil {
		return
	}
	rewound := false
	for len(b) > 0 {
		n, err := fl.f.Read(b)
		b = b[n:]
		switch {
		case n > 0:
			rewound = false
		case errors.Is(err, io.EOF) && !rewound:
			if _, err := fl.f.Seek(0, io.SeekStart); err != nil {
				return // a pipe or device that ended: keep the pattern
			}
			rewound = true
		case err != nil || rewound:
			return
		}
	}
}

// close closes the file; a nil filler has none.
func (fl *filler) close() {
	if fl != nil {
		_ = fl.f.Close()
	}
}
