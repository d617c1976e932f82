package lsrrate

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// sampleLen is how much of each counted frame the counter keeps for
// checking: Ethernet, one label, IPv4 and UDP headers (60 bytes), rounded up.
const sampleLen = 64

// Classic BPF opcodes (linux/filter.h) for the counter's filters.
const (
	bpfLdH  = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
	bpfLdW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfLdB  = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
	bpfAnd  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfRetK = unix.BPF_RET | unix.BPF_K
)

// mplsFilter accepts frames whose ethertype is MPLS unicast and whose first
// label entry has label and S=1 (any TC, any TTL), keeping sampleLen bytes.
func mplsFilter(label uint32) []unix.SockFilter {
	return []unix.SockFilter{
		{Code: bpfLdH, K: 12},                             // 0: A = ethertype
		{Code: bpfJeq, K: 0x8847, Jt: 0, Jf: 4},           // 1: MPLS unicast, else 6
		{Code: bpfLdW, K: ethLen},                         // 2: A = first label entry
		{Code: bpfAnd, K: 0xFFFFF100},                     // 3: keep label and S
		{Code: bpfJeq, K: label<<12 | 1<<8, Jt: 0, Jf: 1}, // 4: label, S=1, else 6
		{Code: bpfRetK, K: sampleLen},                     // 5: accept
		{Code: bpfRetK, K: 0},                             // 6: reject
	}
}

// ipv4UDPFilter accepts IPv4 UDP frames (no label) to dst, keeping
// sampleLen bytes.
func ipv4UDPFilter(dst netip.Addr) []unix.SockFilter {
	a := dst.As4()
	return []unix.SockFilter{
		{Code: bpfLdH, K: 12},                                          // 0: A = ethertype
		{Code: bpfJeq, K: 0x0800, Jt: 0, Jf: 5},                        // 1: IPv4, else 7
		{Code: bpfLdB, K: ethLen + 9},                                  // 2: A = protocol
		{Code: bpfJeq, K: 17, Jt: 0, Jf: 3},                            // 3: UDP, else 7
		{Code: bpfLdW, K: ethLen + 16},                                 // 4: A = destination
		{Code: bpfJeq, K: binary.BigEndian.Uint32(a[:]), Jt: 0, Jf: 1}, // 5: dst, else 7
		{Code: bpfRetK, K: sampleLen},                                  // 6: accept
		{Code: bpfRetK, K: 0},                                          // 7: reject
	}
}

// counter counts the frames that arrive on an interface and pass its
// filter, without reading them: the kernel runs the filter on every frame
// the interface receives and counts the accepted ones in PACKET_STATISTICS
// (tp_packets, which includes the accepted frames it then dropped because
// the socket's receive queue was full). So counting costs one filter run
// per frame and no copy to userspace; the frames that fit in the queue are
// read at the end as samples to check.
type counter struct {
	fd int
}

// openCounter opens the counter on dev in the namespace at nsPath.
func openCounter(nsPath, dev string, filter []unix.SockFilter) (*counter, error) {
	fd, err := openPacketSocket(nsPath, dev, "counter", htons(unix.ETH_P_ALL), func(fd int) error {
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &counter{fd: fd}, nil
}

// frameCounter counts the correctly forwarded frames at the sink and keeps
// a few for checking: the counter socket alone, or the XDP sink in front
// of it.
type frameCounter interface {
	// take returns the frames counted since the last take.
	take() (uint64, error)
	// arm makes the next n counted frames available as samples.
	arm(n int) error
	// samples reads up to max queued samples.
	samples(max int) ([][]byte, error)
	// drain discards every queued sample.
	drain() error
	// describe says what counts, for the progress line.
	describe() string
	// close releases it.
	close() error
}

// arm implements frameCounter: the socket queues every counted frame
// that fits, so the first ones after a drain are the samples.
func (c *counter) arm(int) error { return nil }

// describe implements frameCounter.
func (c *counter) describe() string { return "sink: AF_PACKET socket with a classic BPF filter" }

// htons converts a 16-bit value to network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// take returns the frames counted since the last take (reading
// PACKET_STATISTICS resets it).
func (c *counter) take() (uint64, error) {
	st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, fmt.Errorf("counter: PACKET_STATISTICS: %w", err)
	}
	// The kernel adds tp_drops into tp_packets before answering.
	return uint64(st.Packets), nil
}

// samples reads up to max queued frames (each cut to sampleLen bytes)
// without waiting.
func (c *counter) samples(max int) ([][]byte, error) {
	var out [][]byte
	buf := make([]byte, sampleLen)
	for len(out) < max {
		n, _, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			break
		}
		if err != nil {
			return out, fmt.Errorf("counter: recvfrom: %w", err)
		}
		out = append(out, append([]byte(nil), buf[:n]...))
	}
	return out, nil
}

// drain discards every queued frame.
func (c *counter) drain() error {
	for {
		s, err := c.samples(1024)
		if err != nil || len(s) < 1024 {
			return err
		}
	}
}

// close closes the socket.
func (c *counter) close() error { return unix.Close(c.fd) }

// checkSample checks that a sampled frame is what the sink must see after
// one forwarding hop: the swapped label with S=1 and the label TTL one less
// than sent (label != 0), or IPv4 with the TTL one less (label == 0).
func checkSample(f []byte, label uint32) error {
	if label != 0 {
		if len(f) < ethLen+labelLen {
			return fmt.Errorf("sample of %d bytes: too short for a label", len(f))
		}
		if et := binary.BigEndian.Uint16(f[12:]); et != 0x8847 {
			return fmt.Errorf("sample ethertype %#04x, want 0x8847", et)
		}
		e := binary.BigEndian.Uint32(f[ethLen:])
		if got := e >> 12; got != label {
			return fmt.Errorf("sample label %d, want %d", got, label)
		}
		if e&(1<<8) == 0 {
			return fmt.Errorf("sample label entry %#08x: S bit clear", e)
		}
		if got := e & 0xFF; got != genTTL-1 {
			return fmt.Errorf("sample label TTL %d, want %d", got, genTTL-1)
		}
		return nil
	}
	if len(f) < ethLen+ipv4Len {
		return fmt.Errorf("sample of %d bytes: too short for IPv4", len(f))
	}
	if et := binary.BigEndian.Uint16(f[12:]); et != 0x0800 {
		return fmt.Errorf("sample ethertype %#04x, want 0x0800", et)
	}
	if got := f[ethLen+8]; got != genTTL-1 {
		return fmt.Errorf("sample IPv4 TTL %d, want %d", got, genTTL-1)
	}
	return nil
}
