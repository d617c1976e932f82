//go:build !linux

package netperf

func kernelSetBufSizes(s any, snd, rcv int32)          {}
func kernelBufSizes(s any) (snd, rcv int32, ok bool)   { return 0, 0, false }
func congestionControl(s any) string                   { return "" }
func retransmits(s any) int32                          { return 0 }
func kernelDefaultBufSizes() (snd, rcv int32, ok bool) { return 0, 0, false }
func procValue(path string) (int32, bool)              { return 0, false }

func transportInfo(s any) (retrans, mss int32, cong string) { return -1, -1, "" }
func setCongestionControl(s any, name string)               {}
func setTOS(s any, tos uint8)                               {}
func setDontRoute(s any)                                    {}
