// Package pcap captures a link's frames to a pcap file: a nested gVisor
// link endpoint that sits on a lower link (link/afpacket, link/tap) and
// copies every Ethernet frame it sends or receives, as it is on the wire
// (labels, link header and all), to a Writer.
//
// The file is LINKTYPE_ETHERNET with nanosecond timestamps (magic
// 0xa1b23c4d), readable by tshark, tcpdump and Wireshark. One Writer may
// serve several links; records are whole frames, written under a lock, so
// they never interleave.
//
// It owns the file format and the interception only: what to capture is the
// caller's choice (node's --pcap FILE[,dev]).
package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// LinkTypeEthernet is the pcap link type of Ethernet frames (DLT_EN10MB).
const LinkTypeEthernet = 1

// magicNanos is the pcap magic number that says timestamps carry
// nanoseconds; written in the host's byte order, as readers expect.
const magicNanos = 0xa1b23c4d

// DefaultSnapLen is the largest frame recorded whole; longer frames (GSO
// frames a kernel peer passes over veth reach 64 KiB plus headers) are cut
// to it with their original length kept. It is tcpdump's default.
const DefaultSnapLen = 262144

// flushInterval bounds how long a record waits in the buffer, so that a
// file being read while the node runs stays current.
const flushInterval = 200 * time.Millisecond

// Writer writes pcap records of Ethernet frames to an io.Writer. It is safe
// for concurrent use. Frames are buffered and flushed at least every
// 200 ms and on Close.
type Writer struct {
	snapLen int
	now     func() time.Time

	mu  sync.Mutex
	bw  *bufio.Writer
	c   io.Closer // closed by Close when the Writer owns the file
	err error     // the first write error; capture stops there

	frames  atomic.Uint64
	dropped atomic.Uint64 // frames not recorded after a write error

	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// NewWriter writes the pcap file header to w and returns a Writer that
// records Ethernet frames up to snapLen bytes (0 means DefaultSnapLen). If
// w is an io.Closer, Close closes it.
func NewWriter(w io.Writer, snapLen int) (*Writer, error) {
	return NewWriterLinkType(w, snapLen, LinkTypeEthernet)
}

// NewWriterLinkType is NewWriter for records of another pcap link type
// (LINKTYPE_IPV4, 228, for bare IPv4 packets, say); the capture Endpoint
// needs LinkTypeEthernet.
func NewWriterLinkType(w io.Writer, snapLen int, linkType uint32) (*Writer, error) {
	if snapLen < 0 {
		return nil, fmt.Errorf("pcap: snap length %d is negative", snapLen)
	}
	if snapLen == 0 {
		snapLen = DefaultSnapLen
	}
	pw := &Writer{
		snapLen: snapLen,
		now:     time.Now,
		bw:      bufio.NewWriterSize(w, 1<<16),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if c, ok := w.(io.Closer); ok {
		pw.c = c
	}
	var hdr [24]byte
	binary.NativeEndian.PutUint32(hdr[0:], magicNanos)
	binary.NativeEndian.PutUint16(hdr[4:], 2) // version 2.4
	binary.NativeEndian.PutUint16(hdr[6:], 4)
	// thiszone and sigfigs stay zero: timestamps are UTC.
	binary.NativeEndian.PutUint32(hdr[16:], uint32(snapLen))
	binary.NativeEndian.PutUint32(hdr[20:], linkType)
	if _, err := pw.bw.Write(hdr[:]); err != nil {
		return nil, fmt.Errorf("pcap: write file header: %w", err)
	}
	if err := pw.bw.Flush(); err != nil {
		return nil, fmt.Errorf("pcap: write file header: %w", err)
	}
	go pw.flushLoop()
	return pw, nil
}

// flushLoop flushes the buffer every flushInterval until Close.
func (w *Writer) flushLoop() {
	defer close(w.done)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			if w.err == nil && w.bw.Buffered() > 0 {
				w.setErr(w.bw.Flush())
			}
			w.mu.Unlock()
		}
	}
}

// setErr records the first error. Callers hold mu.
func (w *Writer) setErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// WriteFrame records one frame, given as the slices that make it up (a
// packet buffer's AsSlices), with timestamp ts.
func (w *Writer) WriteFrame(ts time.Time, parts [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked(ts, parts)
}

// writeLocked writes one record. Callers hold mu.
func (w *Writer) writeLocked(ts time.Time, parts [][]byte) {
	if w.err != nil {
		w.dropped.Add(1)
		return
	}
	orig := 0
	for _, p := range parts {
		orig += len(p)
	}
	incl := min(orig, w.snapLen)
	var rec [16]byte
	ns := ts.UnixNano()
	binary.NativeEndian.PutUint32(rec[0:], uint32(ns/1e9))
	binary.NativeEndian.PutUint32(rec[4:], uint32(ns%1e9))
	binary.NativeEndian.PutUint32(rec[8:], uint32(incl))
	binary.NativeEndian.PutUint32(rec[12:], uint32(orig))
	_, err := w.bw.Write(rec[:])
	for _, p := range parts {
		if err != nil || incl == 0 {
			break
		}
		p = p[:min(len(p), incl)]
		_, err = w.bw.Write(p)
		incl -= len(p)
	}
	if err != nil {
		w.setErr(err)
		w.dropped.Add(1)
		return
	}
	w.frames.Add(1)
}

// Frames returns the number of frames recorded.
func (w *Writer) Frames() uint64 { return w.frames.Load() }

// Dropped returns the number of frames not recorded because writing failed
// (see Err).
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Err returns the first write error, after which the Writer records
// nothing more; nil while it records.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.setErr(w.bw.Flush())
	}
	return w.err
}

// errClosed is Err after Close.
var errClosed = errors.New("pcap: writer closed")

// Close flushes the buffered records, stops the flusher and closes the
// underlying writer if it is an io.Closer. It returns the first write
// error, if any. Frames offered after Close are counted as dropped.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.stop)
	w.mu.Unlock()
	<-w.done

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.setErr(w.bw.Flush())
	}
	err := w.err
	if w.c != nil {
		if cerr := w.c.Close(); err == nil {
			err = cerr
		}
	}
	if w.err == nil {
		w.err = errClosed
	}
	return err
}
