package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/mplsnode/mplsnode/netperf"
)

// GVisorClientCommand is the hidden subcommand of seedbench that runs
// GVisorClientMain (configuration 3) inside ns0.
const GVisorClientCommand = "__gvisor-netperf"

// GVisorClientMain is configuration 3's client: the project's netperf client
// on a plain gVisor netstack, as a user of netstack gets it today. gVisor's
// own fdbased link endpoint reads and writes Ethernet frames on an AF_PACKET
// socket bound to the interface, with no GSO (GSOMaxSize 0) and gVisor's
// default TCP settings; the only option set is RXChecksumOffload, because
// veth delivers the kernel's frames with partial checksums that a stack
// verifying them would drop. It prints the netperf report as JSON on stdout
// and returns the process exit code (0 ok, 1 failure, 2 usage).
func GVisorClientMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(GVisorClientCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.String("dev", "virt01", "interface to open with AF_PACKET")
	addr := fs.String("addr", "172.16.20.20/24", "the stack's address and prefix on dev")
	via := fs.String("via", "172.16.20.21", "gateway for -dst")
	dst := fs.String("dst", "172.16.21.0/24", "prefix routed via -via")
	host := fs.String("H", hostPlain, "netserver address")
	port := fs.Int("p", netperf.DefaultPort, "netserver control port")
	test := fs.String("t", string(netperf.TCPStream), "netperf test")
	length := fs.Int("l", 10, "test length in seconds")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	prefix, err1 := netip.ParsePrefix(*addr)
	gw, err2 := netip.ParseAddr(*via)
	dstP, err3 := netip.ParsePrefix(*dst)
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", GVisorClientCommand, err)
		return 2
	}
	s, err := newGVisorStack(*dev, prefix, gw, dstP)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", GVisorClientCommand, err)
		return 1
	}
	defer func() {
		s.Close()
		s.Wait()
	}()
	cfg := netperf.NewConfig(*host, netperf.TestType(*test))
	cfg.Port = *port
	cfg.Length = *length
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, err
		}
		fa := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFromSlice(ap.Addr().Unmap().AsSlice()), Port: ap.Port()}
		return gonet.DialContextTCP(ctx, s, fa, ipv4.ProtocolNumber)
	}
	rep, err := netperf.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", GVisorClientCommand, err)
		return 1
	}
	if err := rep.WriteJSON(stdout); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", GVisorClientCommand, err)
		return 1
	}
	return 0
}

// htons converts a 16-bit value to network byte order for socket calls.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// newGVisorStack builds a netstack with IPv4, ARP and TCP on an fdbased
// endpoint over an AF_PACKET socket on dev.
func newGVisorStack(dev string, addr netip.Prefix, gw netip.Addr, dst netip.Prefix) (*stack.Stack, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind AF_PACKET to %s: %w", dev, err)
	}
	ep, err := fdbased.New(&fdbased.Options{
		FDs:                []int{fd},
		MTU:                uint32(ifi.MTU),
		EthernetHeader:     true,
		Address:            tcpip.LinkAddress(ifi.HardwareAddr),
		PacketDispatchMode: fdbased.RecvMMsg,
		RXChecksumOffload:  true,
	})
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fdbased: %w", err)
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
	})
	if terr := s.CreateNIC(1, ep); terr != nil {
		s.Close()
		return nil, fmt.Errorf("CreateNIC: %s", terr)
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddrFromSlice(addr.Addr().AsSlice()).WithPrefix(),
	}
	pa.AddressWithPrefix.PrefixLen = addr.Bits()
	if terr := s.AddProtocolAddress(1, pa, stack.AddressProperties{}); terr != nil {
		s.Close()
		return nil, fmt.Errorf("AddProtocolAddress: %s", terr)
	}
	subnet := func(p netip.Prefix) tcpip.Subnet {
		p = p.Masked()
		sn, err := tcpip.NewSubnet(tcpip.AddrFromSlice(p.Addr().AsSlice()),
			tcpip.MaskFromBytes(net.CIDRMask(p.Bits(), p.Addr().BitLen())))
		if err != nil {
			panic("bench: subnet " + p.String() + ": " + err.Error())
		}
		return sn
	}
	s.SetRouteTable([]tcpip.Route{
		{Destination: subnet(addr), NIC: 1},
		{Destination: subnet(dst), Gateway: tcpip.AddrFromSlice(gw.AsSlice()), NIC: 1},
	})
	return s, nil
}

// gvisorArgs returns the hidden subcommand's arguments for c.
func gvisorArgs(c *Config, seconds int) []string {
	return []string{"-dev", "virt01", "-addr", "172.16.20.20/24", "-via", "172.16.20.21",
		"-dst", "172.16.21.0/24", "-H", c.Host, "-t", string(c.Test), "-l", strconv.Itoa(seconds)}
}
