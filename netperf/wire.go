package netperf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// MessageSize is the fixed size of every control message in both directions:
// an 8-byte header plus 162 32-bit words. There is no length prefix.
const MessageSize = 656

// DefaultPort is netserver's control port.
const DefaultPort = 12865

// MsgType is the int32 at offset 0 of a control message.
type MsgType int32

// Control message types used by netperf 2.7 (netlib.h numbering).
const (
	TypeDebugOn           MsgType = 1
	TypeDebugOff          MsgType = 2
	TypeDebugOK           MsgType = 3
	TypeNodeIdentify      MsgType = 4
	TypeCPUCalibrate      MsgType = 5
	TypePassphrase        MsgType = 6
	TypeDoTCPStream       MsgType = 10
	TypeTCPStreamResponse MsgType = 11
	TypeTCPStreamResults  MsgType = 12
	TypeDoTCPRR           MsgType = 13
	TypeTCPRRResponse     MsgType = 14
	TypeTCPRRResults      MsgType = 15
	TypeDoTCPCC           MsgType = 300 // classic even in omni builds
	TypeTCPCCResponse     MsgType = 301
	TypeTCPCCResults      MsgType = 302
	TypeDoTCPMaerts       MsgType = 94
	TypeTCPMaertsResponse MsgType = 95
	TypeTCPMaertsResults  MsgType = 96
	TypeDoOmni            MsgType = 97
	TypeOmniResponse      MsgType = 98
	TypeOmniResults       MsgType = 99
	TypeDoSysinfo         MsgType = 600
	TypeSysinfoResponse   MsgType = 601
)

// Errno values the server puts in serv_errno (offset 4).
const (
	// ErrnoUnknownRequest is what netserver answers to a request type it has
	// no handler for.
	ErrnoUnknownRequest = 998
	// ErrnoInvalid (EINVAL) answers a request whose fields would crash or hang
	// a stock netserver (zero size or alignment, bad family, ...).
	ErrnoInvalid = 22
	// ErrnoAFNoSupport (EAFNOSUPPORT) answers an unknown ipfamily.
	ErrnoAFNoSupport = 97
)

// Omni request flags (request offset 56, response offset 32).
const (
	FlagNoDelay        uint32 = 0x00000001
	FlagUseSendfile    uint32 = 0x00000002
	FlagConnectTest    uint32 = 0x00000004 // TCP_CRR: a connection per transaction
	FlagMeasureCPU     uint32 = 0x00000008
	FlagRoutingAllowed uint32 = 0x00000020 // also WANT_REM_CONG: same bit
)

// Omni socket types and protocols (request offsets 96 and 100).
const (
	SocketStream uint32 = 1
	SocketDgram  uint32 = 2
	ProtoTCP     uint32 = 6
	ProtoUDP     uint32 = 17
)

// Omni direction bits, seen from the server.
const (
	DirServerSends    uint32 = 0x2
	DirServerReceives uint32 = 0x4
)

// netperf's own address family codes (omni ipfamily field).
const (
	FamilyUnspec uint32 = 0
	FamilyIPv4   uint32 = 4
	FamilyIPv6   uint32 = 6
)

// CPU measurement methods (results cpu_method); only /proc/stat is produced.
const (
	CPUMethodUnknown  uint32 = 0
	CPUMethodProcStat uint32 = 8
)

// ErrShortMessage reports a control message that is not MessageSize bytes.
var ErrShortMessage = errors.New("netperf: control message is not 656 bytes")

// Message is one control message.
type Message [MessageSize]byte

// Type returns the request or response type word.
func (m *Message) Type() MsgType { return MsgType(m.i32(0)) }

// Word1 returns the second header word: the CPU affinity in a request, the
// serv_errno in a response.
func (m *Message) Word1() int32 { return m.i32(4) }

func (m *Message) u32(off int) uint32       { return binary.BigEndian.Uint32(m[off:]) }
func (m *Message) i32(off int) int32        { return int32(m.u32(off)) }
func (m *Message) f32(off int) float32      { return math.Float32frombits(m.u32(off)) }
func (m *Message) f64(off int) float64      { return math.Float64frombits(binary.BigEndian.Uint64(m[off:])) }
func (m *Message) putU32(off int, v uint32) { binary.BigEndian.PutUint32(m[off:], v) }
func (m *Message) putI32(off int, v int32)  { m.putU32(off, uint32(v)) }
func (m *Message) putF32(off int, v float32) {
	m.putU32(off, math.Float32bits(v))
}
func (m *Message) putF64(off int, v float64) {
	binary.BigEndian.PutUint64(m[off:], math.Float64bits(v))
}

func (m *Message) str(off, n int) string {
	b := m[off : off+n-1] // the last byte is the terminator a sender writes
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (m *Message) putStr(off, n int, s string) {
	clear(m[off : off+n])
	copy(m[off:off+n-1], s) // keep a terminating NUL
}

// header writes the type and word 1.
func (m *Message) header(t MsgType, word1 int32) {
	m.putI32(0, int32(t))
	m.putI32(4, word1)
}

// decodeAddr reads four words holding an address in netperf's encoding:
// IPv4 as a big-endian word 0; IPv6 as four words each byte-reversed (the
// sender htonl()s raw address bytes on a little-endian host). All-zero
// words mean "unset" and give the zero Addr.
func (m *Message) decodeAddr(off int, family uint32) netip.Addr {
	raw := m[off : off+16]
	if bytes.Count(raw, []byte{0}) == 16 {
		return netip.Addr{}
	}
	if family == FamilyIPv6 {
		var a [16]byte
		for w := 0; w < 4; w++ {
			for i := 0; i < 4; i++ {
				a[w*4+i] = raw[w*4+3-i]
			}
		}
		return netip.AddrFrom16(a)
	}
	var a [4]byte
	copy(a[:], raw[:4])
	if a == [4]byte{} {
		return netip.Addr{} // words 1..3 carry nothing for IPv4
	}
	return netip.AddrFrom4(a)
}

func (m *Message) encodeAddr(off int, a netip.Addr) {
	clear(m[off : off+16])
	switch {
	case !a.IsValid():
	case a.Is4():
		b := a.As4()
		copy(m[off:], b[:])
	default:
		b := a.As16()
		for w := 0; w < 4; w++ {
			for i := 0; i < 4; i++ {
				m[off+w*4+i] = b[w*4+3-i]
			}
		}
	}
}

// OmniRequest is a DO_OMNI (type 97) request, protocol section 4.1. Sizes
// of -1 mean "unspecified, use the default".
type OmniRequest struct {
	Affinity      int32 // -1: do not bind netserver to a CPU
	SendBufSize   int32
	SendSize      int32
	SendAlign     uint32
	SendOffset    uint32
	SendWidth     uint32
	RequestSize   int32 // >0 makes this a request/response test
	RecvBufSize   int32
	ReceiveSize   int32
	RecvAlign     uint32
	RecvOffset    uint32
	RecvWidth     uint32
	ResponseSize  int32
	Flags         uint32
	CPURate       float32
	TestLength    int32 // >0 seconds; <0 -transactions (RR) or -bytes (stream)
	SoRcvAvoid    uint32
	SoSndAvoid    uint32
	SendDirty     int32
	RecvDirty     int32
	RecvClean     int32
	DataPort      uint32 // port the server binds its data listener to; 0 = any
	IPFamily      uint32
	SocketType    uint32
	Protocol      uint32
	Direction     uint32
	NetperfPort   uint32
	IntervalBurst uint32
	IntervalUsecs uint32
	NetperfIP     netip.Addr // client's data address; zero when not given
	NetserverIP   netip.Addr // address the server binds its data listener to
	SocketPrio    int32
	SocketTOS     int32
	CongControl   string // at most 15 bytes
	FillFile      string // at most 31 bytes
}

// Marshal encodes r as a DO_OMNI message.
func (r *OmniRequest) Marshal(m *Message) {
	*m = Message{}
	m.header(TypeDoOmni, r.Affinity)
	m.putI32(8, r.SendBufSize)
	m.putI32(12, r.SendSize)
	m.putU32(16, r.SendAlign)
	m.putU32(20, r.SendOffset)
	m.putU32(24, r.SendWidth)
	m.putI32(28, r.RequestSize)
	m.putI32(32, r.RecvBufSize)
	m.putI32(36, r.ReceiveSize)
	m.putU32(40, r.RecvAlign)
	m.putU32(44, r.RecvOffset)
	m.putU32(48, r.RecvWidth)
	m.putI32(52, r.ResponseSize)
	m.putU32(56, r.Flags)
	m.putF32(60, r.CPURate)
	m.putI32(64, r.TestLength)
	m.putU32(68, r.SoRcvAvoid)
	m.putU32(72, r.SoSndAvoid)
	m.putI32(76, r.SendDirty)
	m.putI32(80, r.RecvDirty)
	m.putI32(84, r.RecvClean)
	m.putU32(88, r.DataPort)
	m.putU32(92, r.IPFamily)
	m.putU32(96, r.SocketType)
	m.putU32(100, r.Protocol)
	m.putU32(104, r.Direction)
	m.putU32(108, r.NetperfPort)
	m.putU32(112, r.IntervalBurst)
	m.putU32(116, r.IntervalUsecs)
	m.encodeAddr(120, r.NetperfIP)
	m.encodeAddr(136, r.NetserverIP)
	m.putI32(152, r.SocketPrio)
	m.putI32(156, r.SocketTOS)
	m.putStr(160, 16, r.CongControl)
	m.putStr(176, 32, r.FillFile)
}

// Unmarshal decodes a DO_OMNI message into r. It does not check the type.
func (r *OmniRequest) Unmarshal(m *Message) {
	*r = OmniRequest{
		Affinity:      m.i32(4),
		SendBufSize:   m.i32(8),
		SendSize:      m.i32(12),
		SendAlign:     m.u32(16),
		SendOffset:    m.u32(20),
		SendWidth:     m.u32(24),
		RequestSize:   m.i32(28),
		RecvBufSize:   m.i32(32),
		ReceiveSize:   m.i32(36),
		RecvAlign:     m.u32(40),
		RecvOffset:    m.u32(44),
		RecvWidth:     m.u32(48),
		ResponseSize:  m.i32(52),
		Flags:         m.u32(56),
		CPURate:       m.f32(60),
		TestLength:    m.i32(64),
		SoRcvAvoid:    m.u32(68),
		SoSndAvoid:    m.u32(72),
		SendDirty:     m.i32(76),
		RecvDirty:     m.i32(80),
		RecvClean:     m.i32(84),
		DataPort:      m.u32(88),
		IPFamily:      m.u32(92),
		SocketType:    m.u32(96),
		Protocol:      m.u32(100),
		Direction:     m.u32(104),
		NetperfPort:   m.u32(108),
		IntervalBurst: m.u32(112),
		IntervalUsecs: m.u32(116),
		SocketPrio:    m.i32(152),
		SocketTOS:     m.i32(156),
		CongControl:   m.str(160, 16),
		FillFile:      m.str(176, 32),
	}
	r.NetperfIP = m.decodeAddr(120, r.IPFamily)
	r.NetserverIP = m.decodeAddr(136, r.IPFamily)
}

// IsRR reports whether the request describes a request/response test.
func (r *OmniRequest) IsRR() bool { return r.RequestSize > 0 }

// IsUDP reports whether the request is for a datagram (UDP) test.
func (r *OmniRequest) IsUDP() bool { return r.SocketType == SocketDgram }

// maxMessageSize bounds every per-call size a request may ask for, so a
// hostile request cannot make the server allocate gigabytes (netperf's own
// default sizes are at most a socket buffer, a few MiB).
const maxMessageSize = 64 << 20

// Validate reports the first field that would make a stock netserver crash,
// hang or misbehave (protocol section 8.2), or that this server cannot run.
func (r *OmniRequest) Validate() error {
	switch {
	case r.IPFamily != FamilyIPv4 && r.IPFamily != FamilyIPv6:
		return fmt.Errorf("ipfamily %d: want 4 or 6", r.IPFamily)
	case r.SocketType != SocketStream && r.SocketType != SocketDgram:
		return fmt.Errorf("socket_type %d: want 1 (stream, TCP) or 2 (datagram, UDP)", r.SocketType)
	case r.SocketType == SocketStream && r.Protocol != 0 && r.Protocol != ProtoTCP:
		return fmt.Errorf("protocol %d on a stream socket: only TCP (6) is supported", r.Protocol)
	case r.SocketType == SocketDgram && r.Protocol != 0 && r.Protocol != ProtoUDP:
		return fmt.Errorf("protocol %d on a datagram socket: only UDP (17) is supported", r.Protocol)
	case r.SendAlign == 0 || r.RecvAlign == 0:
		return fmt.Errorf("alignment 0 (send %d, recv %d)", r.SendAlign, r.RecvAlign)
	case r.SendAlign > maxMessageSize || r.RecvAlign > maxMessageSize:
		return fmt.Errorf("alignment too large (send %d, recv %d)", r.SendAlign, r.RecvAlign)
	case r.Flags&FlagUseSendfile != 0:
		return fmt.Errorf("flags %#x: sendfile tests are not supported", r.Flags)
	case r.Flags&FlagConnectTest != 0 && (r.SocketType != SocketStream || !r.IsRR()):
		return fmt.Errorf("flags %#x: a connect test must be TCP request/response", r.Flags)
	case r.DataPort > 0xffff:
		return fmt.Errorf("data_port %d out of range", r.DataPort)
	}
	switch r.Direction {
	case DirServerReceives:
		if r.IsRR() {
			return fmt.Errorf("request_size %d with direction %d", r.RequestSize, r.Direction)
		}
		return checkSize("receive_size", r.ReceiveSize)
	case DirServerSends:
		if r.IsUDP() {
			return errors.New("a UDP test where only the server sends is not supported")
		}
		if r.IsRR() {
			return fmt.Errorf("request_size %d with direction %d", r.RequestSize, r.Direction)
		}
		return checkSize("send_size", r.SendSize)
	case DirServerSends | DirServerReceives:
		if !r.IsRR() {
			return fmt.Errorf("request/response direction with request_size %d", r.RequestSize)
		}
		if err := checkSize("request_size", r.RequestSize); err != nil {
			return err
		}
		if r.ResponseSize <= 0 {
			return fmt.Errorf("response_size %d: want > 0", r.ResponseSize)
		}
		return checkSize("response_size", r.ResponseSize)
	}
	return fmt.Errorf("direction %d: want 2, 4 or 6", r.Direction)
}

// checkSize accepts -1 (default) or 1..maxMessageSize.
func checkSize(name string, v int32) error {
	if v == 0 || v < -1 || v > maxMessageSize {
		return fmt.Errorf("%s %d: want -1 or 1..%d", name, v, maxMessageSize)
	}
	return nil
}

// OmniSetup is the omni setup response (type 98), protocol section 4.3.
type OmniSetup struct {
	Errno       int32
	RecvBufSize int32
	ReceiveSize int32
	RecvWidth   int32
	SendBufSize int32
	SendSize    int32
	SendWidth   int32
	Flags       uint32 // only FlagNoDelay and FlagMeasureCPU are meaningful
	CPURate     float32
	TestLength  uint32
	SoRcvAvoid  uint32
	SoSndAvoid  uint32
	DataPort    uint32 // the client connects here
	SocketPrio  int32
	SocketTOS   int32
}

// Marshal encodes s as an OMNI_RESPONSE message.
func (s *OmniSetup) Marshal(m *Message) {
	*m = Message{}
	m.header(TypeOmniResponse, s.Errno)
	m.putI32(8, s.RecvBufSize)
	m.putI32(12, s.ReceiveSize)
	m.putI32(16, s.RecvWidth)
	m.putI32(20, s.SendBufSize)
	m.putI32(24, s.SendSize)
	m.putI32(28, s.SendWidth)
	m.putU32(32, s.Flags)
	m.putF32(36, s.CPURate)
	m.putU32(40, s.TestLength)
	m.putU32(44, s.SoRcvAvoid)
	m.putU32(48, s.SoSndAvoid)
	m.putU32(52, s.DataPort)
	m.putI32(72, s.SocketPrio)
	m.putI32(76, s.SocketTOS)
}

// Unmarshal decodes an omni setup response. The type word is ignored: the
// stock netserver sends stale values there (protocol section 2.3).
func (s *OmniSetup) Unmarshal(m *Message) {
	*s = OmniSetup{
		Errno:       m.i32(4),
		RecvBufSize: m.i32(8),
		ReceiveSize: m.i32(12),
		RecvWidth:   m.i32(16),
		SendBufSize: m.i32(20),
		SendSize:    m.i32(24),
		SendWidth:   m.i32(28),
		// Mask to the bits a setup response may carry: with -i the stock
		// server leaves a stale, byte-swapped word here.
		Flags:      m.u32(32) & (FlagNoDelay | FlagMeasureCPU),
		CPURate:    m.f32(36),
		TestLength: m.u32(40),
		SoRcvAvoid: m.u32(44),
		SoSndAvoid: m.u32(48),
		DataPort:   m.u32(52) & 0xffff,
		SocketPrio: m.i32(72),
		SocketTOS:  m.i32(76),
	}
}

// OmniResults is the omni results message (type word 98, stale in stock
// netserver), protocol section 4.4.
type OmniResults struct {
	Errno            int32
	BytesReceived    uint64
	RecvCalls        uint32
	RecvBufSize      int32 // at the end of the test
	BytesSent        uint64
	SendCalls        uint32
	SendBufSize      int32 // at the end of the test
	FailedSends      uint32
	TransReceived    uint32
	ElapsedTime      float32 // seconds, informational
	CPUUtil          float32 // percent, only with FlagMeasureCPU
	CPUUser          float32
	CPUSystem        float32
	CPUIOWait        float32
	CPUIRQ           float32
	CPUSoftIRQ       float32
	ServDem          float32
	CPUMethod        uint32
	NumCPUs          uint32
	PeakCPUID        int32
	PeakCPUUtil      float32
	TransportRetrans int32
	CongControl      string
}

// Marshal encodes r as a results message with type OMNI_RESPONSE (98), the
// type the stock server uses.
func (r *OmniResults) Marshal(m *Message) {
	*m = Message{}
	m.header(TypeOmniResponse, r.Errno)
	m.putU32(8, uint32(r.BytesReceived>>32))
	m.putU32(12, uint32(r.BytesReceived))
	m.putU32(16, r.RecvCalls)
	m.putI32(20, r.RecvBufSize)
	m.putU32(24, uint32(r.BytesSent>>32))
	m.putU32(28, uint32(r.BytesSent))
	m.putU32(32, r.SendCalls)
	m.putI32(36, r.SendBufSize)
	m.putU32(40, r.FailedSends)
	m.putU32(44, r.TransReceived)
	m.putF32(48, r.ElapsedTime)
	m.putF32(52, r.CPUUtil)
	m.putF32(56, r.CPUUser)
	m.putF32(60, r.CPUSystem)
	m.putF32(64, r.CPUIOWait)
	m.putF32(68, r.CPUIRQ)
	m.putF32(72, r.CPUSoftIRQ)
	m.putF32(76, r.ServDem)
	m.putU32(80, r.CPUMethod)
	m.putU32(84, r.NumCPUs)
	m.putI32(88, r.PeakCPUID)
	m.putF32(92, r.PeakCPUUtil)
	m.putI32(112, r.TransportRetrans)
	m.putStr(276, 16, r.CongControl)
}

// Unmarshal decodes an omni results message, ignoring the type word.
func (r *OmniResults) Unmarshal(m *Message) {
	*r = OmniResults{
		Errno:            m.i32(4),
		BytesReceived:    uint64(m.u32(8))<<32 | uint64(m.u32(12)),
		RecvCalls:        m.u32(16),
		RecvBufSize:      m.i32(20),
		BytesSent:        uint64(m.u32(24))<<32 | uint64(m.u32(28)),
		SendCalls:        m.u32(32),
		SendBufSize:      m.i32(36),
		FailedSends:      m.u32(40),
		TransReceived:    m.u32(44),
		ElapsedTime:      m.f32(48),
		CPUUtil:          m.f32(52),
		CPUUser:          m.f32(56),
		CPUSystem:        m.f32(60),
		CPUIOWait:        m.f32(64),
		CPUIRQ:           m.f32(68),
		CPUSoftIRQ:       m.f32(72),
		ServDem:          m.f32(76),
		CPUMethod:        m.u32(80),
		NumCPUs:          m.u32(84),
		PeakCPUID:        m.i32(88),
		PeakCPUUtil:      m.f32(92),
		TransportRetrans: m.i32(112),
		CongControl:      m.str(276, 16),
	}
}

// Request is a decoded client-to-server control message. Exactly one of
// Omni, Classic is set for test requests; Passphrase is set for type 6.
type Request struct {
	Type       MsgType
	Omni       *OmniRequest
	Classic    *ClassicRequest
	Passphrase string
}

// ParseRequest decodes one client-to-server control message. It fails on a
// message that is not exactly MessageSize bytes; unknown types parse (the
// server answers them with ErrnoUnknownRequest). Field validity is checked
// separately by Validate, so a caller can still answer with an errno.
func ParseRequest(b []byte) (Request, error) {
	if len(b) != MessageSize {
		return Request{}, fmt.Errorf("%w: got %d bytes", ErrShortMessage, len(b))
	}
	m := (*Message)(b)
	req := Request{Type: m.Type()}
	switch req.Type {
	case TypeDoOmni:
		req.Omni = new(OmniRequest)
		req.Omni.Unmarshal(m)
	case TypeDoTCPStream, TypeDoTCPMaerts, TypeDoTCPRR, TypeDoTCPCC:
		req.Classic = new(ClassicRequest)
		if err := req.Classic.Unmarshal(m); err != nil {
			return Request{}, err
		}
	case TypePassphrase:
		req.Passphrase = m.str(8, MessageSize-8)
	}
	return req, nil
}

// PassphraseMessage builds the type-6 message netperf -Z sends.
func PassphraseMessage(pass string) *Message {
	m := new(Message)
	m.header(TypePassphrase, -1)
	m.putStr(8, MessageSize-8, pass)
	return m
}
