package lsrrate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Indexes of the sink program's counters (bpf/trafficgen.c).
const (
	sinkMatched = 0
	sinkOther   = 1
)

// xdpSink counts the correctly forwarded frames on the sink's veth with
// lsrrate_sink (bpf/trafficgen.c), native XDP: per-CPU counters and an
// XDP_DROP, so counting costs the sink less than the cheapest forwarder
// costs the LSR, and the sink's kernel never sees those frames. It tests
// the frames as the counter's classic BPF filter does (mplsFilter,
// ipv4UDPFilter). The counter socket stays open behind it for the
// samples: after arm(n) the program passes the next n counted frames up,
// where the socket's filter queues them.
type xdpSink struct {
	*counter
	objs struct {
		Prog     *ebpf.Program `ebpf:"lsrrate_sink"`
		Counters *ebpf.Map     `ebpf:"sink_counters"`
		Samples  *ebpf.Map     `ebpf:"samples_left"`
	}
	link        link.Link
	last, other uint64
}

// openXDPSink attaches the sink program to dev in the namespace at nsPath
// (label != 0: count MPLS frames with that label and S=1; label 0: IPv4
// UDP to dst), with the counter socket c behind it for samples.
func openXDPSink(nsPath, dev string, label uint32, dst netip.Addr, c *counter) (*xdpSink, error) {
	s := &xdpSink{counter: c}
	spec, err := loadTrafficgen()
	if err != nil {
		return nil, fmt.Errorf("xdp sink: %w", err)
	}
	a := dst.As4()
	if err := spec.Variables["want_label"].Set(label); err != nil {
		return nil, fmt.Errorf("xdp sink: %w", err)
	}
	// want_dst is compared with the header's bytes as loaded: network order.
	if err := spec.Variables["want_dst"].Set(binary.NativeEndian.Uint32(a[:])); err != nil {
		return nil, fmt.Errorf("xdp sink: %w", err)
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("xdp sink: load: %w", err)
	}
	err = inNamespace(nsPath, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		s.link, err = link.AttachXDP(link.XDPOptions{Program: s.objs.Prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		s.closeObjs()
		return nil, fmt.Errorf("xdp sink: attach to %s: %w", dev, err)
	}
	return s, nil
}

// counts returns the program's matched and other counters, all CPUs.
func (s *xdpSink) counts() (matched, other uint64, err error) {
	for _, c := range []struct {
		index uint32
		total *uint64
	}{{sinkMatched, &matched}, {sinkOther, &other}} {
		var per []uint64
		if err := s.objs.Counters.Lookup(c.index, &per); err != nil {
			return 0, 0, fmt.Errorf("xdp sink: read counters: %w", err)
		}
		for _, v := range per {
			*c.total += v
		}
	}
	return matched, other, nil
}

// take implements frameCounter: frames counted since the last take.
func (s *xdpSink) take() (uint64, error) {
	m, o, err := s.counts()
	if err != nil {
		return 0, err
	}
	n := m - s.last
	s.last, s.other = m, o
	return n, nil
}

// arm implements frameCounter: pass the next n counted frames up to the
// counter socket.
func (s *xdpSink) arm(n int) error {
	if err := s.objs.Samples.Put(uint32(0), int64(n)); err != nil {
		return fmt.Errorf("xdp sink: samples_left: %w", err)
	}
	return nil
}

// describe implements frameCounter.
func (s *xdpSink) describe() string {
	return fmt.Sprintf("sink: xdp, %d other frames passed up so far", s.other)
}

// closeObjs closes the program and maps.
func (s *xdpSink) closeObjs() error {
	return errors.Join(s.objs.Prog.Close(), s.objs.Counters.Close(), s.objs.Samples.Close())
}

// close implements frameCounter: detach, then close the socket.
func (s *xdpSink) close() error {
	var err error
	if s.link != nil {
		err = s.link.Close()
	}
	return errors.Join(err, s.closeObjs(), s.counter.close())
}
