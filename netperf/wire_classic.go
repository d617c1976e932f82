package netperf

import (
	"fmt"
)

// ClassicTest names the test of a classic (non-omni) request.
type ClassicTest uint8

// Classic tests.
const (
	ClassicStream ClassicTest = iota + 1
	ClassicMaerts
	ClassicRR
	// ClassicCC is TCP_CC (connect/close): the RR layouts, its own types.
	ClassicCC
)

// rrLayout reports whether t's messages use the TCP_RR layouts.
func (t ClassicTest) rrLayout() bool { return t == ClassicRR || t == ClassicCC }

// ClassicRequest is a DO_TCP_STREAM (10), DO_TCP_MAERTS (94) or DO_TCP_RR
// (13) request from a netperf built with --enable-omni=no (section 9). Each
// test uses only some fields; the others stay zero.
type ClassicRequest struct {
	Test         ClassicTest
	Affinity     int32
	SendBufSize  int32
	RecvBufSize  int32
	SendSize     int32 // MAERTS
	ReceiveSize  int32 // STREAM
	SendAlign    int32
	SendOffset   int32
	RecvAlign    int32
	RecvOffset   int32
	RequestSize  int32 // RR
	ResponseSize int32 // RR
	NoDelay      int32
	MeasureCPU   int32
	CPURate      float32
	TestLength   int32
	SoRcvAvoid   int32
	SoSndAvoid   int32
	DirtyCount   int32
	CleanCount   int32
	Port         int32
	IPFamily     int32
}

// classicType maps a classic test to its request, response and results types.
func (t ClassicTest) types() (req, resp, results MsgType) {
	switch t {
	case ClassicStream:
		return TypeDoTCPStream, TypeTCPStreamResponse, TypeTCPStreamResults
	case ClassicMaerts:
		return TypeDoTCPMaerts, TypeTCPMaertsResponse, TypeTCPMaertsResults
	case ClassicCC:
		return TypeDoTCPCC, TypeTCPCCResponse, TypeTCPCCResults
	default:
		return TypeDoTCPRR, TypeTCPRRResponse, TypeTCPRRResults
	}
}

// Marshal encodes r as a classic request of r.Test's type.
func (r *ClassicRequest) Marshal(m *Message) {
	*m = Message{}
	req, _, _ := r.Test.types()
	m.header(req, r.Affinity)
	switch r.Test {
	case ClassicStream, ClassicMaerts:
		m.putI32(8, r.SendBufSize)
		m.putI32(12, r.RecvBufSize)
		if r.Test == ClassicStream {
			m.putI32(16, r.ReceiveSize)
			m.putI32(20, r.RecvAlign)
			m.putI32(24, r.RecvOffset)
		} else {
			m.putI32(16, r.SendSize)
			m.putI32(20, r.SendAlign)
			m.putI32(24, r.SendOffset)
		}
		m.putI32(28, r.NoDelay)
		m.putI32(32, r.MeasureCPU)
		m.putF32(36, r.CPURate)
		m.putI32(40, r.TestLength)
		m.putI32(44, r.SoRcvAvoid)
		m.putI32(48, r.SoSndAvoid)
		m.putI32(52, r.DirtyCount)
		m.putI32(56, r.CleanCount)
		m.putI32(60, r.Port)
		m.putI32(64, r.IPFamily)
	case ClassicRR, ClassicCC:
		m.putI32(8, r.RecvBufSize)
		m.putI32(12, r.SendBufSize)
		m.putI32(16, r.RecvAlign)
		m.putI32(20, r.RecvOffset)
		m.putI32(24, r.SendAlign)
		m.putI32(28, r.SendOffset)
		m.putI32(32, r.RequestSize)
		m.putI32(36, r.ResponseSize)
		m.putI32(40, r.NoDelay)
		m.putI32(44, r.MeasureCPU)
		m.putF32(48, r.CPURate)
		m.putI32(52, r.TestLength)
		m.putI32(56, r.SoRcvAvoid)
		m.putI32(60, r.SoSndAvoid)
		m.putI32(64, r.Port)
		m.putI32(68, r.IPFamily)
	}
}

// Unmarshal decodes a classic request; the test comes from the type word.
func (r *ClassicRequest) Unmarshal(m *Message) error {
	*r = ClassicRequest{Affinity: m.i32(4)}
	switch m.Type() {
	case TypeDoTCPStream, TypeDoTCPMaerts:
		r.Test = ClassicStream
		r.SendBufSize, r.RecvBufSize = m.i32(8), m.i32(12)
		if m.Type() == TypeDoTCPStream {
			r.ReceiveSize, r.RecvAlign, r.RecvOffset = m.i32(16), m.i32(20), m.i32(24)
		} else {
			r.Test = ClassicMaerts
			r.SendSize, r.SendAlign, r.SendOffset = m.i32(16), m.i32(20), m.i32(24)
		}
		r.NoDelay, r.MeasureCPU, r.CPURate = m.i32(28), m.i32(32), m.f32(36)
		r.TestLength, r.SoRcvAvoid, r.SoSndAvoid = m.i32(40), m.i32(44), m.i32(48)
		r.DirtyCount, r.CleanCount, r.Port, r.IPFamily = m.i32(52), m.i32(56), m.i32(60), m.i32(64)
	case TypeDoTCPRR, TypeDoTCPCC:
		r.Test = ClassicRR
		if m.Type() == TypeDoTCPCC {
			r.Test = ClassicCC
		}
		r.RecvBufSize, r.SendBufSize = m.i32(8), m.i32(12)
		r.RecvAlign, r.RecvOffset, r.SendAlign, r.SendOffset = m.i32(16), m.i32(20), m.i32(24), m.i32(28)
		r.RequestSize, r.ResponseSize = m.i32(32), m.i32(36)
		r.NoDelay, r.MeasureCPU, r.CPURate = m.i32(40), m.i32(44), m.f32(48)
		r.TestLength, r.SoRcvAvoid, r.SoSndAvoid = m.i32(52), m.i32(56), m.i32(60)
		r.Port, r.IPFamily = m.i32(64), m.i32(68)
	default:
		return fmt.Errorf("netperf: type %d is not a classic request", m.Type())
	}
	return nil
}

// Validate reports a field this server refuses (see OmniRequest.Validate).
func (r *ClassicRequest) Validate() error {
	if r.IPFamily != int32(FamilyIPv4) && r.IPFamily != int32(FamilyIPv6) {
		return fmt.Errorf("ipfamily %d: want 4 or 6", r.IPFamily)
	}
	if r.Port < 0 || r.Port > 0xffff {
		return fmt.Errorf("port %d out of range", r.Port)
	}
	// The classic client sends 0 for an unspecified message size (the
	// captures show receive_size 0), so 0 means "default" here.
	switch r.Test {
	case ClassicStream:
		if r.RecvAlign <= 0 || r.RecvAlign > maxMessageSize {
			return fmt.Errorf("recv_alignment %d", r.RecvAlign)
		}
		if r.ReceiveSize < -1 || r.ReceiveSize > maxMessageSize {
			return fmt.Errorf("receive_size %d", r.ReceiveSize)
		}
	case ClassicMaerts:
		if r.SendAlign <= 0 || r.SendAlign > maxMessageSize {
			return fmt.Errorf("send_alignment %d", r.SendAlign)
		}
		if r.SendSize < -1 || r.SendSize > maxMessageSize {
			return fmt.Errorf("send_size %d", r.SendSize)
		}
	default:
		if r.RecvAlign <= 0 || r.SendAlign <= 0 || r.RecvAlign > maxMessageSize || r.SendAlign > maxMessageSize {
			return fmt.Errorf("alignment 0 or too large (recv %d, send %d)", r.RecvAlign, r.SendAlign)
		}
		if r.RequestSize <= 0 || r.ResponseSize <= 0 || r.RequestSize > maxMessageSize || r.ResponseSize > maxMessageSize {
			return fmt.Errorf("request/response size %d,%d", r.RequestSize, r.ResponseSize)
		}
	}
	return nil
}

// ClassicSetup is a classic setup response (types 11, 95, 14).
type ClassicSetup struct {
	Test        ClassicTest
	Errno       int32
	RecvBufSize int32
	MsgSize     int32 // STREAM receive_size, MAERTS send_size; unused for RR
	NoDelay     int32
	MeasureCPU  int32
	TestLength  int32
	SendBufSize int32
	DataPort    int32
	CPURate     float32
	SoRcvAvoid  int32
	SoSndAvoid  int32
}

// Marshal encodes s.
func (s *ClassicSetup) Marshal(m *Message) {
	*m = Message{}
	_, resp, _ := s.Test.types()
	m.header(resp, s.Errno)
	m.putI32(8, s.RecvBufSize)
	if s.Test.rrLayout() {
		m.putI32(12, s.NoDelay)
		m.putI32(16, s.MeasureCPU)
		m.putI32(20, s.TestLength)
		m.putI32(24, s.SendBufSize)
		m.putI32(28, s.DataPort)
		m.putF32(32, s.CPURate)
		m.putI32(36, s.SoRcvAvoid)
		m.putI32(40, s.SoSndAvoid)
		return
	}
	m.putI32(12, s.MsgSize)
	m.putI32(16, s.NoDelay)
	m.putI32(20, s.MeasureCPU)
	m.putI32(24, s.TestLength)
	m.putI32(28, s.SendBufSize)
	m.putI32(32, s.DataPort)
	m.putF32(36, s.CPURate)
	m.putI32(40, s.SoRcvAvoid)
	m.putI32(44, s.SoSndAvoid)
}

// Unmarshal decodes a classic setup response of test t (the type word is
// not trusted).
func (s *ClassicSetup) Unmarshal(m *Message, t ClassicTest) {
	*s = ClassicSetup{Test: t, Errno: m.i32(4), RecvBufSize: m.i32(8)}
	if t.rrLayout() {
		s.NoDelay, s.MeasureCPU, s.TestLength = m.i32(12), m.i32(16), m.i32(20)
		s.SendBufSize, s.DataPort, s.CPURate = m.i32(24), m.i32(28)&0xffff, m.f32(32)
		s.SoRcvAvoid, s.SoSndAvoid = m.i32(36), m.i32(40)
		return
	}
	s.MsgSize, s.NoDelay, s.MeasureCPU, s.TestLength = m.i32(12), m.i32(16), m.i32(20), m.i32(24)
	s.SendBufSize, s.DataPort, s.CPURate = m.i32(28), m.i32(32)&0xffff, m.f32(36)
	s.SoRcvAvoid, s.SoSndAvoid = m.i32(40), m.i32(44)
}

// ClassicResults is a classic results message.
type ClassicResults struct {
	Test          ClassicTest
	Errno         int32
	Bytes         float64 // STREAM bytes received, MAERTS bytes sent, RR bytes received
	Calls         uint32  // recv_calls (STREAM, RR) or send_calls (MAERTS)
	TransReceived uint32  // RR only
	ElapsedTime   float32
	CPUUtil       float32
	ServDem       float32
	CPUMethod     int32
	NumCPUs       int32
	RecvBufSize   int32 // STREAM only
	SendBufSize   int32 // STREAM only
}

// Marshal encodes r with the *_RESULTS type of its test.
func (r *ClassicResults) Marshal(m *Message) {
	*m = Message{}
	_, _, res := r.Test.types()
	m.header(res, r.Errno)
	if r.Test.rrLayout() {
		m.putU32(8, uint32(r.Bytes))
		m.putU32(12, r.Calls)
		m.putU32(16, r.TransReceived)
	} else {
		m.putF64(8, r.Bytes)
		m.putU32(16, r.Calls)
	}
	m.putF32(20, r.ElapsedTime)
	m.putF32(24, r.CPUUtil)
	m.putF32(28, r.ServDem)
	m.putI32(32, r.CPUMethod)
	m.putI32(36, r.NumCPUs)
	if r.Test == ClassicStream {
		m.putI32(40, r.RecvBufSize)
		m.putI32(44, r.SendBufSize)
	}
}

// Unmarshal decodes a classic results message of test t.
func (r *ClassicResults) Unmarshal(m *Message, t ClassicTest) {
	*r = ClassicResults{Test: t, Errno: m.i32(4)}
	if t.rrLayout() {
		r.Bytes, r.Calls, r.TransReceived = float64(m.u32(8)), m.u32(12), m.u32(16)
	} else {
		r.Bytes, r.Calls = m.f64(8), m.u32(16)
	}
	r.ElapsedTime, r.CPUUtil, r.ServDem = m.f32(20), m.f32(24), m.f32(28)
	r.CPUMethod, r.NumCPUs = m.i32(32), m.i32(36)
	if t == ClassicStream {
		r.RecvBufSize, r.SendBufSize = m.i32(40), m.i32(44)
	}
}
