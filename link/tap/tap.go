//go:build linux

// Package tap is a gVisor link endpoint that sends and receives whole
// Ethernet frames through a Linux TAP device, created or attached with
// github.com/songgao/water (IFF_TAP, IFF_NO_PI: no packet-information header).
//
// It owns the TAP file descriptor, brings the device up, and moves frames:
// one goroutine reads frames into a preallocated buffer and delivers them
// with DeliverNetworkPacket(0, pkt) (Ethernet header unconsumed), and
// WritePackets writes each packet as one frame with writev. It knows nothing
// of MPLS or of any network protocol: it is a "lower link" as
// docs/CONTRACTS.md defines it.
//
// The kernel hands a TAP without IFF_VNET_HDR only complete frames with full
// checksums (it segments and checksums before the TAP), so frames arrive with
// pkt.RXChecksumValidated false and the stack verifies them.
//
// Link address: the endpoint is the far end of the TAP "wire", so it must
// not use the TAP device's own MAC (a bridge holding the TAP delivers frames
// for that MAC to the host instead of forwarding them into the TAP). By
// default it uses a random locally administered MAC; see Options.LinkAddress.
package tap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/songgao/water"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// DefaultReadBufferSize bounds a received frame. A TAP without IFF_VNET_HDR
// gets frames of at most MTU + Ethernet header (+ VLAN tags); 64 KiB covers
// any MTU a TAP can have.
const DefaultReadBufferSize = 1 << 16

// Options configures New.
type Options struct {
	// Name is the TAP device's name. Empty lets the kernel choose (tapN);
	// an existing TAP of that name is attached to.
	Name string

	// Persist keeps the device after the endpoint closes (TUNSETPERSIST).
	Persist bool

	// MTU overrides the link MTU read from the device. 0 means the device's
	// MTU (1500 for a new TAP).
	MTU uint32

	// LinkAddress is the MAC the endpoint reports (the userspace side's
	// address). Empty means a random locally administered unicast MAC.
	LinkAddress tcpip.LinkAddress

	// ReadBufferSize bounds received frames; longer ones are truncated by
	// the kernel and dropped (Stats.RXTruncated). 0 means
	// DefaultReadBufferSize.
	ReadBufferSize int
}

// Stats are the endpoint's counters.
type Stats struct {
	// RXPackets and RXBytes count frames delivered upward.
	RXPackets, RXBytes uint64
	// RXTruncated counts frames that filled the read buffer, dropped.
	RXTruncated uint64
	// RXNotAttached counts frames read while no dispatcher was attached.
	RXNotAttached uint64
	// RXErrors counts failed reads.
	RXErrors uint64
	// TXPackets and TXBytes count frames written.
	TXPackets, TXBytes uint64
	// TXErrors counts frames whose write failed; the error was returned from
	// WritePackets.
	TXErrors uint64
}

// Addr is the net.Addr of a TAP device; it appears in *net.OpError values.
type Addr struct {
	// Interface is the device's name.
	Interface string
}

// Network implements net.Addr.
func (Addr) Network() string { return "tap" }

// String implements net.Addr.
func (a Addr) String() string { return a.Interface }

// hintError adds a remedy to an error without hiding it from errors.Is.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintError) Unwrap() error { return e.err }

func opError(name string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		err = &hintError{err, "creating a TAP needs CAP_NET_ADMIN: run as root or grant the capability"}
	case errors.Is(err, unix.ENOENT):
		err = &hintError{err, "no /dev/net/tun: load the tun module"}
	case errors.Is(err, unix.EBUSY):
		err = &hintError{err, fmt.Sprintf("%q exists and is not a free TAP", name)}
	}
	return &net.OpError{Op: "open", Net: "tap", Addr: Addr{name}, Err: err}
}

// Endpoint is a stack.LinkEndpoint over a TAP device. Create it with New; it
// is safe for concurrent use.
type Endpoint struct {
	name string
	file *os.File
	rc   syscall.RawConn
	mtu  atomic.Uint32

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	addr       tcpip.LinkAddress
	started    bool
	onClose    func()

	// Receive state, touched only by the receive goroutine.
	rxBuf  []byte
	rxN    int
	rxErr  unix.Errno
	readFn func(fd uintptr) bool

	// Send state, under txMu.
	txMu    sync.Mutex
	txIovs  []unix.Iovec
	txErr   unix.Errno
	writeFn func(fd uintptr) bool

	rxPackets, rxBytes, rxTrunc, rxNoDisp, rxErrors atomic.Uint64
	txPackets, txBytes, txErrors                    atomic.Uint64

	wg        sync.WaitGroup
	closeOnce sync.Once
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// New creates (or attaches to) the TAP device in the calling thread's
// network namespace and brings it up. Receiving starts at Attach.
//
// Errors are *net.OpError values wrapping the underlying error, so
// errors.Is(err, syscall.EPERM) works when CAP_NET_ADMIN is missing.
func New(opts Options) (*Endpoint, error) {
	if opts.ReadBufferSize < 0 {
		return nil, fmt.Errorf("tap: negative ReadBufferSize %d", opts.ReadBufferSize)
	}
	if len(opts.Name) >= unix.IFNAMSIZ {
		return nil, opError(opts.Name, unix.EINVAL)
	}
	ifce, err := water.New(water.Config{
		DeviceType: water.TAP,
		PlatformSpecificParams: water.PlatformSpecificParams{
			Name:    opts.Name,
			Persist: opts.Persist,
		},
	})
	if err != nil {
		return nil, opError(opts.Name, err)
	}
	f, ok := ifce.ReadWriteCloser.(*os.File)
	if !ok {
		ifce.Close()
		return nil, opError(opts.Name, fmt.Errorf("water returned %T, want *os.File", ifce.ReadWriteCloser))
	}
	e := &Endpoint{name: ifce.Name(), file: f}
	if e.rc, err = f.SyscallConn(); err != nil {
		f.Close()
		return nil, opError(e.name, err)
	}
	mtu, err := bringUp(e.name)
	if err != nil {
		f.Close()
		return nil, opError(e.name, err)
	}
	if opts.MTU != 0 {
		mtu = opts.MTU
	}
	e.mtu.Store(mtu)
	e.addr = opts.LinkAddress
	if e.addr == "" {
		var mac [6]byte
		_, _ = rand.Read(mac[:])
		mac[0] = mac[0]&^1 | 2 // unicast, locally administered
		e.addr = tcpip.LinkAddress(mac[:])
	}
	rbs := opts.ReadBufferSize
	if rbs == 0 {
		rbs = DefaultReadBufferSize
	}
	e.rxBuf = make([]byte, rbs)
	e.txIovs = make([]unix.Iovec, 0, 16)
	e.readFn = e.read
	e.writeFn = e.writev
	return e, nil
}

// ifreq is struct ifreq: name, then a 24-byte union of which we use the
// leading short (ifr_flags) or int (ifr_mtu); 40 bytes in all.
type ifreq struct {
	name  [unix.IFNAMSIZ]byte
	union [24]byte
}

// bringUp sets IFF_UP on the device and returns its MTU.
func bringUp(name string) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	var r ifreq
	copy(r.name[:unix.IFNAMSIZ-1], name)
	ioctl := func(req uintptr, call string) error {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&r))); e != 0 {
			return os.NewSyscallError(call, e)
		}
		return nil
	}
	if err := ioctl(unix.SIOCGIFFLAGS, "ioctl SIOCGIFFLAGS"); err != nil {
		return 0, err
	}
	*(*uint16)(unsafe.Pointer(&r.union[0])) |= unix.IFF_UP
	if err := ioctl(unix.SIOCSIFFLAGS, "ioctl SIOCSIFFLAGS"); err != nil {
		return 0, err
	}
	if err := ioctl(unix.SIOCGIFMTU, "ioctl SIOCGIFMTU"); err != nil {
		return 0, err
	}
	return uint32(*(*int32)(unsafe.Pointer(&r.union[0]))), nil
}

// read is the RawConn.Read callback: one frame.
func (e *Endpoint) read(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&e.rxBuf[0])), uintptr(len(e.rxBuf)))
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		e.rxN, e.rxErr = int(n), errno
		return true
	}
}

// rxLoop reads frames until the device is closed.
func (e *Endpoint) rxLoop() {
	defer e.wg.Done()
	for {
		if err := e.rc.Read(e.readFn); err != nil {
			return // closed
		}
		switch {
		case e.rxErr != 0:
			e.rxErrors.Add(1)
			continue
		case e.rxN >= len(e.rxBuf):
			e.rxTrunc.Add(1)
			continue
		case e.rxN == 0:
			continue
		}
		e.mu.RLock()
		d := e.dispatcher
		e.mu.RUnlock()
		if d == nil {
			e.rxNoDisp.Add(1)
			continue
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(e.rxBuf[:e.rxN])})
		d.DeliverNetworkPacket(0, pkt)
		pkt.DecRef()
		e.rxPackets.Add(1)
		e.rxBytes.Add(uint64(e.rxN))
	}
}

// writev is the RawConn.Write callback: one frame from txIovs.
func (e *Endpoint) writev(fd uintptr) bool {
	for {
		_, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&e.txIovs[0])), uintptr(len(e.txIovs)))
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		e.txErr = errno
		return true
	}
}

// WritePackets implements stack.LinkWriter.WritePackets: each packet is
// written as one frame with one writev.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	sent := 0
	for _, pkt := range pkts.AsSlice() {
		e.txIovs = e.txIovs[:0]
		size := 0
		vl, off := pkt.AsViewList()
		for v := vl.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			b = b[off:]
			off = 0
			var iov unix.Iovec
			iov.Base = &b[0]
			iov.SetLen(len(b))
			e.txIovs = append(e.txIovs, iov)
			size += len(b)
		}
		if size == 0 {
			sent++
			continue
		}
		e.txErr = 0
		err := e.rc.Write(e.writeFn)
		clear(e.txIovs)
		if err != nil {
			return sent, &tcpip.ErrClosedForSend{}
		}
		if e.txErr != 0 {
			e.txErrors.Add(1)
			return sent, tcpip.TranslateErrno(e.txErr)
		}
		sent++
		e.txPackets.Add(1)
		e.txBytes.Add(uint64(size))
	}
	return sent, nil
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	return Stats{
		RXPackets:     e.rxPackets.Load(),
		RXBytes:       e.rxBytes.Load(),
		RXTruncated:   e.rxTrunc.Load(),
		RXNotAttached: e.rxNoDisp.Load(),
		RXErrors:      e.rxErrors.Load(),
		TXPackets:     e.txPackets.Load(),
		TXBytes:       e.txBytes.Load(),
		TXErrors:      e.txErrors.Load(),
	}
}

// Name returns the TAP device's name.
func (e *Endpoint) Name() string { return e.name }

// MTU implements stack.LinkEndpoint.MTU: the link MTU (L2 payload).
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.SetMTU. It changes what MTU reports,
// not the device.
func (e *Endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint.MaxHeaderLength: 0, frames
// arrive with their link header already built.
func (*Endpoint) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint.LinkAddress: the userspace
// side's MAC (Options.LinkAddress or a random one), not the device's.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.addr
}

// SetLinkAddress implements stack.LinkEndpoint.SetLinkAddress.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addr = addr
}

// Capabilities implements stack.LinkEndpoint.Capabilities: none.
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// Attach implements stack.LinkEndpoint.Attach. The first non-nil dispatcher
// starts the receive goroutine; it runs until Close. With a nil dispatcher
// frames are counted in Stats.RXNotAttached and dropped.
func (e *Endpoint) Attach(dispatcher stack.NetworkDispatcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dispatcher = dispatcher
	if dispatcher == nil || e.started {
		return
	}
	e.started = true
	e.wg.Add(1)
	go e.rxLoop()
}

// IsAttached implements stack.LinkEndpoint.IsAttached.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

// Wait implements stack.LinkEndpoint.Wait: it returns once the receive
// goroutine has stopped (after Close).
func (e *Endpoint) Wait() { e.wg.Wait() }

// ARPHardwareType implements stack.LinkEndpoint.ARPHardwareType.
func (*Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint.AddHeader: nothing to add.
func (*Endpoint) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint.ParseHeader: nothing to parse.
func (*Endpoint) ParseHeader(*stack.PacketBuffer) bool { return true }

// SetOnCloseAction implements stack.LinkEndpoint.SetOnCloseAction.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onClose = f
}

// Close implements stack.LinkEndpoint.Close: it closes the TAP file (the
// device goes unless Options.Persist), stopping the receive goroutine, and
// runs the on-close action. Safe to call more than once.
func (e *Endpoint) Close() {
	first := false
	e.closeOnce.Do(func() {
		first = true
		e.file.Close()
	})
	if !first {
		return
	}
	// The on-close action runs outside the Once: gVisor's action removes
	// the NIC, which closes this endpoint again, and a re-entrant
	// Once.Do would deadlock.
	e.mu.RLock()
	f := e.onClose
	e.mu.RUnlock()
	if f != nil {
		f()
	}
}
