package netperf

import (
	"net/netip"
)

// ClassicTests are the tests Config.Classic runs with nettest_bsd.c's
// messages.
var ClassicTests = []TestType{TCPStream, TCPMaerts, TCPRR, TCPCC}

func classicTest(t TestType) ClassicTest {
	switch t {
	case TCPMaerts:
		return ClassicMaerts
	case TCPRR:
		return ClassicRR
	case TCPCC:
		return ClassicCC
	}
	return ClassicStream
}

func classicRequest(cfg *Config, family uint32) ClassicRequest {
	r := ClassicRequest{
		Test: classicTest(cfg.Test), Affinity: -1,
		SendBufSize: cfg.RemoteSendBuf, RecvBufSize: cfg.RemoteRecvBuf,
		TestLength: int32(cfg.Length), IPFamily: int32(family), Port: int32(cfg.RemoteDataPort),
		CPURate: cfg.RemoteCPURate,
	}
	if cfg.RemoteCPU {
		r.MeasureCPU = 1
	}
	if cfg.NoDelay {
		r.NoDelay = 1
	}
	// The classic protocol encodes "default message size" as 0, not -1.
	switch r.Test {
	case ClassicStream:
		r.ReceiveSize, r.RecvAlign = max(cfg.RemoteRecvSize, 0), defaultAlignment
	case ClassicMaerts:
		r.SendSize, r.SendAlign = max(cfg.RemoteSendSize, 0), defaultAlignment
	case ClassicRR, ClassicCC:
		r.RecvAlign, r.SendAlign = defaultAlignment, defaultAlignment
		r.RequestSize, r.ResponseSize = cfg.RequestSize, cfg.ResponseSize
	}
	return r
}

func omniRequest(cfg *Config, family uint32, lsnd, lrcv int32, plan dataPlan) OmniRequest {
	affinity := int32(-1)
	if cfg.BindRemote {
		affinity = cfg.RemoteAffinity
	}
	r := OmniRequest{
		Affinity: affinity, SendBufSize: cfg.RemoteSendBuf, SendSize: cfg.RemoteSendSize,
		SendAlign: defaultAlignment, RequestSize: -1, RecvBufSize: cfg.RemoteRecvBuf,
		ReceiveSize: cfg.RemoteRecvSize, RecvAlign: defaultAlignment, ResponseSize: -1,
		Flags: FlagRoutingAllowed, TestLength: int32(cfg.Length), CPURate: cfg.RemoteCPURate,
		SendOffset: cfg.RemoteSendOffset, RecvOffset: cfg.RemoteRecvOffset,
		SendDirty: -1, RecvDirty: -1, RecvClean: -1,
		DataPort: uint32(cfg.RemoteDataPort), IPFamily: family, SocketType: 1, Protocol: 6,
		NetperfPort: uint32(cfg.LocalDataPort), SocketPrio: -1, SocketTOS: cfg.RemoteTOS.wire(),
		CongControl: cfg.RemoteCongControl, FillFile: cfg.RemoteFillFile,
	}
	if cfg.RemoteCPU {
		r.Flags |= FlagMeasureCPU
	}
	if cfg.NoDelay {
		r.Flags |= FlagNoDelay
	}
	if a, err := netip.ParseAddr(cfg.LocalDataAddr); err == nil {
		r.NetperfIP = a.Unmap()
	}
	if a, err := netip.ParseAddr(cfg.DataHost); err == nil {
		r.NetserverIP = a.Unmap()
	}
	// The widths are the client's own ring widths, echoed by the server.
	// Stock sizes them from its socket's buffer as Linux reports it after
	// -s, which doubles the request.
	if cfg.LocalSendBuf >= 0 {
		lsnd = 2 * cfg.LocalSendBuf
	}
	if cfg.LocalRecvBuf >= 0 {
		lrcv = 2 * cfg.LocalRecvBuf
	}
	switch cfg.Test {
	case TCPStream:
		r.Direction = DirServerReceives
		r.SendWidth = uint32(width(0, lsnd, plan.sendSize))
	case TCPMaerts:
		r.Direction = DirServerSends
		r.RecvWidth = uint32(width(0, lrcv, plan.recvSize))
	case UDPStream:
		r.Direction = DirServerReceives
		r.SendWidth = uint32(width(0, lsnd, plan.sendSize))
	default: // the request/response tests
		r.Direction = DirServerSends | DirServerReceives
		r.RequestSize, r.ResponseSize = cfg.RequestSize, cfg.ResponseSize
		r.SendWidth, r.RecvWidth = 1, 1
	}
	if cfg.Test.IsUDP() {
		r.SocketType, r.Protocol = SocketDgram, ProtoUDP
	}
	if !cfg.routingAllowed() {
		// Stock clears ROUTING_ALLOWED for UDP_STREAM (-R 1 sets it).
		r.Flags &^= FlagRoutingAllowed
	}
	if cfg.Test == TCPCRR {
		r.Flags |= FlagConnectTest
	}
	return r
}
