// Package pcap captures a link's frames to a capture file: a nested gVisor
// link endpoint that sits on a lower link (link/afpacket, link/tap) and
// copies every Ethernet frame it sends or receives, as it is on the wire
// (labels, link header and all), to a Writer.
//
// Two file formats, both read by tshark, tcpdump and Wireshark:
//
//   - pcap (NewWriter): LINKTYPE_ETHERNET with nanosecond timestamps (magic
//     0xa1b23c4d), no record of which link a frame crossed.
//   - pcapng (Options.NG): one Interface Description Block per link (its
//     name in if_name, its MTU in if_description, Ethernet, nanosecond
//     timestamps) and each frame in an Enhanced Packet Block naming its
//     link and direction (inbound or outbound), so one frame seen on two
//     links reads as two frames of two interfaces, not a retransmission.
//
// A Writer may rotate its files as tcpdump's -C and -W do (Create with
// Options.FileSize and Options.FileCount); each file starts with the whole
// header (the interfaces included), so each reads on its own.
//
// One Writer may serve several links; records are whole frames, written
// under a lock, so they never interleave. The first write error (a full
// disk, a reader that went away) stops the capture; Options.OnError hears
// of it.
//
// It owns the file formats and the interception only: what to capture is
// the caller's choice (node's --pcap FILE[,dev]).
package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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

// Direction says whether a frame was received or sent (pcapng epb_flags).
type Direction uint32

// Directions of a frame, as pcapng's epb_flags encode them.
const (
	DirUnknown  Direction = 0
	DirInbound  Direction = 1
	DirOutbound Direction = 2
)

// Options configures a Writer. The zero value is a pcap (not pcapng)
// writer of Ethernet frames with DefaultSnapLen.
type Options struct {
	// SnapLen is the most bytes recorded of a frame; 0 means
	// DefaultSnapLen.
	SnapLen int
	// NG selects pcapng: interfaces (AddInterface) and directions.
	NG bool
	// LinkType is the records' link type; 0 means LinkTypeEthernet. The
	// capture Endpoint needs LinkTypeEthernet.
	LinkType uint32
	// FileSize, with Create, starts a new file once the current one holds
	// more than FileSize bytes (tcpdump -C, which counts millions of
	// bytes); 0 never rotates.
	FileSize int64
	// FileCount, with FileSize, keeps at most FileCount files, reusing the
	// oldest name (tcpdump -W); 0 keeps every file.
	FileCount int
	// OnError, if set, is called once with the first write error, after
	// which the Writer records nothing. It runs with the Writer locked:
	// it must not call the Writer's methods.
	OnError func(error)
}

// iface is one pcapng interface.
type iface struct {
	name string
	mtu  uint32
}

// Writer writes capture records to an io.Writer or to a set of rotating
// files. It is safe for concurrent use. Frames are buffered and flushed
// at least every 200 ms and on Close.
type Writer struct {
	o   Options
	now func() time.Time

	mu     sync.Mutex
	bw     *bufio.Writer
	c      io.Closer // closed by Close (or rotation) when the Writer owns the file
	err    error     // the first write error; capture stops there
	ifaces []iface   // pcapng interfaces, written again at the top of every file

	path      string // Create's path ("" for NewWriter's io.Writer)
	seq       int    // the current file's number
	fileBytes int64  // bytes written to the current file
	files     atomic.Int64

	frames  atomic.Uint64
	dropped atomic.Uint64 // frames not recorded after a write error

	// scratch holds a record's header and trailer (under mu): an array
	// on the stack would escape through bufio's io.Writer, one allocation
	// a frame.
	scratch [epbFixedLen]byte

	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// NewWriter writes the pcap file header to w and returns a Writer that
// records Ethernet frames up to snapLen bytes (0 means DefaultSnapLen). If
// w is an io.Closer, Close closes it.
func NewWriter(w io.Writer, snapLen int) (*Writer, error) {
	return NewWriterOptions(w, Options{SnapLen: snapLen})
}

// NewWriterLinkType is NewWriter for records of another pcap link type
// (LINKTYPE_IPV4, 228, for bare IPv4 packets, say); the capture Endpoint
// needs LinkTypeEthernet.
func NewWriterLinkType(w io.Writer, snapLen int, linkType uint32) (*Writer, error) {
	return NewWriterOptions(w, Options{SnapLen: snapLen, LinkType: linkType})
}

// NewWriterOptions writes the file header (pcap, or pcapng's section
// header) to w and returns a Writer configured by o; o.FileSize must be 0
// (rotation needs Create). If w is an io.Closer, Close closes it.
func NewWriterOptions(w io.Writer, o Options) (*Writer, error) {
	if o.FileSize != 0 || o.FileCount != 0 {
		return nil, errors.New("pcap: rotation (FileSize, FileCount) needs Create")
	}
	pw, err := newWriter(o)
	if err != nil {
		return nil, err
	}
	pw.setFile(w)
	if err := pw.startFile(); err != nil {
		return nil, err
	}
	go pw.flushLoop()
	return pw, nil
}

// Create creates the file path (mode 0600: it holds the traffic itself),
// writes its header and returns a Writer configured by o. With o.FileSize
// the files rotate as tcpdump -C/-W name them: path, path1, path2, ...;
// with o.FileCount as well, path0 .. path<FileCount-1> (the number padded
// to FileCount's digits), reused in turn.
func Create(path string, o Options) (*Writer, error) {
	if o.FileSize < 0 || o.FileCount < 0 || (o.FileCount > 0 && o.FileSize == 0) {
		return nil, fmt.Errorf("pcap: file size %d, count %d: want a count only with a size, neither negative", o.FileSize, o.FileCount)
	}
	pw, err := newWriter(o)
	if err != nil {
		return nil, err
	}
	pw.path = path
	if err := pw.openFile(); err != nil {
		return nil, err
	}
	go pw.flushLoop()
	return pw, nil
}

func newWriter(o Options) (*Writer, error) {
	if o.SnapLen < 0 {
		return nil, fmt.Errorf("pcap: snap length %d is negative", o.SnapLen)
	}
	if o.SnapLen == 0 {
		o.SnapLen = DefaultSnapLen
	}
	if o.LinkType == 0 {
		o.LinkType = LinkTypeEthernet
	}
	return &Writer{o: o, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// FileName is the name of rotated file number seq of path, as tcpdump
// names them (see Create).
func FileName(path string, seq, count int) string {
	if count > 0 {
		return fmt.Sprintf("%s%0*d", path, len(strconv.Itoa(count-1)), seq)
	}
	if seq == 0 {
		return path
	}
	return path + strconv.Itoa(seq)
}

// setFile makes w the current output.
func (w *Writer) setFile(f io.Writer) {
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 1<<16)
	} else {
		w.bw.Reset(f)
	}
	w.c = nil
	if c, ok := f.(io.Closer); ok {
		w.c = c
	}
	w.fileBytes = 0
	w.files.Add(1)
}

// openFile creates the current file of a Create writer and writes its
// header. Callers hold mu (or own w alone).
func (w *Writer) openFile() error {
	name := w.path
	if w.o.FileSize > 0 {
		name = FileName(w.path, w.seq, w.o.FileCount)
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err // names the file
	}
	w.setFile(f)
	if err := w.startFile(); err != nil {
		f.Close()
		return fmt.Errorf("pcap %s: %w", name, err)
	}
	return nil
}

// startFile writes the file header (pcap) or the section header and every
// interface (pcapng) and flushes them.
func (w *Writer) startFile() error {
	if w.o.NG {
		w.writeSHB()
		for _, ifc := range w.ifaces {
			w.writeIDB(ifc)
		}
	} else {
		var hdr [24]byte
		binary.NativeEndian.PutUint32(hdr[0:], magicNanos)
		binary.NativeEndian.PutUint16(hdr[4:], 2) // version 2.4
		binary.NativeEndian.PutUint16(hdr[6:], 4)
		// thiszone and sigfigs stay zero: timestamps are UTC.
		binary.NativeEndian.PutUint32(hdr[16:], uint32(w.o.SnapLen))
		binary.NativeEndian.PutUint32(hdr[20:], w.o.LinkType)
		w.write(hdr[:])
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("write file header: %w", err)
	}
	return nil
}

// write buffers b, counting it against the file size. Errors surface at
// the next Flush (bufio keeps the first).
func (w *Writer) write(b []byte) {
	n, _ := w.bw.Write(b)
	w.fileBytes += int64(n)
}

// pcapng block types and options (draft-ietf-opsawg-pcapng).
const (
	blockSHB        = 0x0A0D0D0A
	blockIDB        = 0x00000001
	blockEPB        = 0x00000006
	byteOrderMagic  = 0x1A2B3C4D
	optEnd          = 0
	optSHBUserAppl  = 4
	optIfName       = 2
	optIfDesc       = 3
	optIfTsresol    = 9
	optEPBFlags     = 2
	tsresolNanos    = 9
	epbFixedLen     = 28 // type, length, interface, ts high, ts low, captured, original
	epbOptionsLen   = 12 // epb_flags (4 + 4) and opt_endofopt (4)
	blockTrailerLen = 4
)

// option appends a pcapng option (code, length, value padded to 32 bits).
func option(b []byte, code uint16, val []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, code)
	b = binary.NativeEndian.AppendUint16(b, uint16(len(val)))
	b = append(b, val...)
	for range (4 - len(val)%4) % 4 {
		b = append(b, 0)
	}
	return b
}

// block writes a pcapng block of type typ whose body is body.
func (w *Writer) block(typ uint32, body []byte) {
	total := uint32(8 + len(body) + blockTrailerLen)
	var hdr [8]byte
	binary.NativeEndian.PutUint32(hdr[0:], typ)
	binary.NativeEndian.PutUint32(hdr[4:], total)
	w.write(hdr[:])
	w.write(body)
	w.write(binary.NativeEndian.AppendUint32(nil, total))
}

func (w *Writer) writeSHB() {
	b := binary.NativeEndian.AppendUint32(nil, byteOrderMagic)
	b = binary.NativeEndian.AppendUint16(b, 1) // version 1.0
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint64(b, ^uint64(0)) // section length unknown
	b = option(b, optSHBUserAppl, []byte("mplsnode"))
	b = option(b, optEnd, nil)
	w.block(blockSHB, b)
}

func (w *Writer) writeIDB(ifc iface) {
	b := binary.NativeEndian.AppendUint16(nil, uint16(w.o.LinkType))
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint32(b, uint32(w.o.SnapLen))
	b = option(b, optIfName, []byte(ifc.name))
	b = option(b, optIfDesc, []byte("mplsnode link "+ifc.name+", MTU "+strconv.FormatUint(uint64(ifc.mtu), 10)))
	b = option(b, optIfTsresol, []byte{tsresolNanos})
	b = option(b, optEnd, nil)
	w.block(blockIDB, b)
}

// AddInterface declares a link whose frames the Writer records and
// returns its interface id for WriteFrameOn. In pcapng its Interface
// Description Block (name, MTU in the description, link type, snap
// length) is written now and at the top of every rotated file; in pcap it
// returns 0 and writes nothing.
func (w *Writer) AddInterface(name string, mtu uint32) uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.o.NG {
		return 0
	}
	ifc := iface{name: name, mtu: mtu}
	w.ifaces = append(w.ifaces, ifc)
	if w.err == nil {
		w.writeIDB(ifc)
	}
	return uint32(len(w.ifaces) - 1)
}

// NG reports whether the Writer writes pcapng.
func (w *Writer) NG() bool { return w.o.NG }

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

// setErr records the first error and tells OnError. Callers hold mu.
func (w *Writer) setErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
		if w.o.OnError != nil {
			w.o.OnError(err)
		}
	}
}

// WriteFrame records one frame, given as the slices that make it up (a
// packet buffer's AsSlices), with timestamp ts; in pcapng it is recorded
// on interface 0 with no direction.
func (w *Writer) WriteFrame(ts time.Time, parts [][]byte) {
	w.WriteFrameOn(0, DirUnknown, ts, parts)
}

// WriteFrameOn records one frame crossing interface id (from
// AddInterface) in direction dir; pcap files keep neither.
func (w *Writer) WriteFrameOn(id uint32, dir Direction, ts time.Time, parts [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked(id, dir, ts, parts)
}

// writeLocked writes one record. Callers hold mu.
func (w *Writer) writeLocked(id uint32, dir Direction, ts time.Time, parts [][]byte) {
	if w.err == nil && w.o.FileSize > 0 && w.fileBytes > w.o.FileSize {
		w.rotateLocked()
	}
	if w.err != nil {
		w.dropped.Add(1)
		return
	}
	orig := 0
	for _, p := range parts {
		orig += len(p)
	}
	incl := min(orig, w.o.SnapLen)
	ns := ts.UnixNano()
	if w.o.NG {
		pad := (4 - incl%4) % 4
		total := uint32(epbFixedLen + incl + pad + epbOptionsLen + blockTrailerLen)
		hdr := w.scratch[:epbFixedLen]
		binary.NativeEndian.PutUint32(hdr[0:], blockEPB)
		binary.NativeEndian.PutUint32(hdr[4:], total)
		binary.NativeEndian.PutUint32(hdr[8:], id)
		binary.NativeEndian.PutUint32(hdr[12:], uint32(uint64(ns)>>32))
		binary.NativeEndian.PutUint32(hdr[16:], uint32(ns))
		binary.NativeEndian.PutUint32(hdr[20:], uint32(incl))
		binary.NativeEndian.PutUint32(hdr[24:], uint32(orig))
		w.write(hdr)
		w.writeParts(parts, incl)
		// Padding, epb_flags, opt_endofopt, the block's length again.
		t := w.scratch[:pad+epbOptionsLen+blockTrailerLen]
		clear(t)
		binary.NativeEndian.PutUint16(t[pad:], optEPBFlags)
		binary.NativeEndian.PutUint16(t[pad+2:], 4)
		binary.NativeEndian.PutUint32(t[pad+4:], uint32(dir))
		binary.NativeEndian.PutUint32(t[pad+epbOptionsLen:], total)
		w.write(t)
	} else {
		rec := w.scratch[:16]
		binary.NativeEndian.PutUint32(rec[0:], uint32(ns/1e9))
		binary.NativeEndian.PutUint32(rec[4:], uint32(ns%1e9))
		binary.NativeEndian.PutUint32(rec[8:], uint32(incl))
		binary.NativeEndian.PutUint32(rec[12:], uint32(orig))
		w.write(rec)
		w.writeParts(parts, incl)
	}
	// bufio keeps its first error; a failed record is not counted.
	if _, err := w.bw.Write(nil); err != nil {
		w.setErr(err)
		w.dropped.Add(1)
		return
	}
	w.frames.Add(1)
}

// writeParts writes the first incl bytes of parts.
func (w *Writer) writeParts(parts [][]byte, incl int) {
	for _, p := range parts {
		if incl == 0 {
			break
		}
		p = p[:min(len(p), incl)]
		w.write(p)
		incl -= len(p)
	}
}

// rotateLocked closes the current file and starts the next. Callers hold
// mu.
func (w *Writer) rotateLocked() {
	w.setErr(w.bw.Flush())
	if w.c != nil {
		w.setErr(w.c.Close())
		w.c = nil
	}
	if w.err != nil {
		return
	}
	w.seq++
	if w.o.FileCount > 0 {
		w.seq %= w.o.FileCount
	}
	w.setErr(w.openFile())
}

// Frames returns the number of frames recorded.
func (w *Writer) Frames() uint64 { return w.frames.Load() }

// Files returns the number of files started so far (1 without rotation).
func (w *Writer) Files() int { return int(w.files.Load()) }

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
		w.c = nil
	}
	if w.err == nil {
		w.err = errClosed
	}
	return err
}
