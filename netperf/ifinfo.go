package netperf

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// interfaceOf returns the name of the interface holding addr, "" when
// none of this namespace's interfaces does.
func interfaceOf(addr netip.Addr) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap() == addr {
				return ifc.Name
			}
		}
	}
	return ""
}

// ifDriver is what ethtool -i says of an interface.
type ifDriver struct{ name, version, firmware, bus string }

// pciID reads one of /sys/class/net/IF/device's hex ids ("vendor",
// "device", "subsystem_vendor", "subsystem_device") as netperf printed
// them ("0x%.4x"); stock's 0xfffffffe (-2) when the interface has none.
func pciID(ifname, file string) string {
	if ifname == "" {
		return unknownIfID
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/net", ifname, "device", file))
	if err != nil {
		return unknownIfID
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
	if err != nil {
		return unknownIfID
	}
	return fmt.Sprintf("0x%.4x", v)
}

// localDriverOutput is a LOCAL_DRIVER_* or LOCAL_INTERFACE_SLOT value:
// the field of the data interface's ethtool driver information, stock's
// "Deprecated" when there is no interface or it has none (loopback).
func localDriverOutput(field func(ifDriver) string) func(*Report) (string, bool) {
	return func(r *Report) (string, bool) {
		if d, ok := driverInfo(r.Result.LocalInterface); ok {
			return field(d), true
		}
		return deprecatedValue, true
	}
}

// setLocalInterfaceOutputs points the LOCAL_INTERFACE_* and
// LOCAL_DRIVER_* outputs at the data connection's interface (kernel
// sockets); called once the stock defaults are in omniOutputs.
func setLocalInterfaceOutputs() {
	omniOutputs["LOCAL_INTERFACE_NAME"] = omniOutput{[4]string{"Local", "Interface", "Name"}, func(r *Report) (string, bool) {
		if r.Result.LocalInterface == "" {
			return deprecatedValue, true
		}
		return r.Result.LocalInterface, true
	}}
	for name, file := range map[string]string{"VENDOR": "vendor", "DEVICE": "device", "SUBVENDOR": "subsystem_vendor", "SUBDEVICE": "subsystem_device"} {
		o := omniOutputs["LOCAL_INTERFACE_"+name]
		o.value = func(r *Report) (string, bool) { return pciID(r.Result.LocalInterface, file), true }
		omniOutputs["LOCAL_INTERFACE_"+name] = o
	}
	for name, field := range map[string]func(ifDriver) string{
		"DRIVER_NAME": func(d ifDriver) string { return d.name }, "DRIVER_VERSION": func(d ifDriver) string { return d.version },
		"DRIVER_FIRMWARE": func(d ifDriver) string { return d.firmware }, "DRIVER_BUS": func(d ifDriver) string { return d.bus },
		"INTERFACE_SLOT": func(d ifDriver) string { return d.bus },
	} {
		o := omniOutputs["LOCAL_"+name]
		o.value = localDriverOutput(field)
		omniOutputs["LOCAL_"+name] = o
	}
}
