package netperf

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
)

// deprecatedValue is what stock netperf 2.7.1 prints for the system,
// interface, driver and security outputs: print_omni_init_list points them
// all at its deprecated_str ("Deprecated"), as netserver answers
// DO_SYSINFO with ",Deprecated,Deprecated,Deprecated,Deprecated"; no code
// fills them in any more.
const deprecatedValue = "Deprecated"

// unknownIfID is an interface vendor/device id stock never filled: -2
// printed with "0x%.4x" as an unsigned int.
const unknownIfID = "0xfffffffe"

// unsetTOS is an IP TOS stock never set (-1) printed with "0x%.2x".
const unsetTOS = "0xffffffff"

func constValue(v string) func(*Report) (string, bool) {
	return func(*Report) (string, bool) { return v, true }
}

// addressFamilyNumber is the AF_* number netperf prints for SOURCE_FAMILY
// and DEST_FAMILY: AF_UNSPEC (0) unless a test-specific -4, -6 or
// -H/-L name,family set it; AF_INET6 is Linux's 10.
func addressFamilyNumber(f uint32) int {
	switch f {
	case FamilyIPv4:
		return 2
	case FamilyIPv6:
		return 10
	}
	return 0
}

// sourceAddr is SOURCE_ADDR, netperf's local_data_address as
// complete_addrinfos settles it: the test-specific -L; without it and
// without a test-specific -H, the control connection's local name (the
// global -L, else "0.0.0.0" or "::0"); with a -H, the wildcard of the
// data family.
func (r *Report) sourceAddr() string {
	if r.Config.LocalDataAddr != "" {
		return r.Config.LocalDataAddr
	}
	if r.Config.LocalHost != "" && r.Config.DataHost == "" {
		return r.Config.LocalHost
	}
	if r.Family == FamilyIPv6 || r.Config.LocalDataFamily == FamilyIPv6 {
		return "::0"
	}
	return "0.0.0.0"
}

// cpuInfo is what /proc/cpuinfo says of the first CPU: its model name and
// its clock in whole MHz (0 when the kernel does not say).
type cpuInfo struct {
	model string
	mhz   int
}

var localCPUInfo = sync.OnceValue(func() cpuInfo { return readCPUInfo("/proc/cpuinfo") })

func readCPUInfo(path string) cpuInfo {
	ci := cpuInfo{model: deprecatedValue}
	f, err := os.Open(path)
	if err != nil {
		return ci
	}
	defer f.Close()
	var haveModel, haveMHz bool
	sc := bufio.NewScanner(f)
	for sc.Scan() && !(haveModel && haveMHz) {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && !haveModel:
			ci.model, haveModel = v, true
		case k == "cpu MHz" && !haveMHz:
			if mhz, err := strconv.ParseFloat(v, 64); err == nil {
				ci.mhz, haveMHz = int(mhz), true
			}
		}
	}
	return ci
}

// localSystemModel is the DMI product name, "Deprecated" (stock's value)
// without one.
var localSystemModel = sync.OnceValue(func() string {
	b, err := os.ReadFile("/sys/class/dmi/id/product_name")
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return deprecatedValue
})

// init adds the outputs stock netperf accepts whose values come from no
// measurement: addressing as the command line set it, and the system,
// interface, driver and security names stock prints as "Deprecated".
// Where this host can tell, ours are real: the local CPU model and clock,
// the DMI system model, and on kernel sockets the data connection's
// interface, its ethtool driver information and PCI ids
// (setLocalInterfaceOutputs); the server's stay "Deprecated", as stock
// netserver answers DO_SYSINFO.
// Headers are print_omni_init_list's, quirks included (REMOTE_SECURITY_
// ENABLED_NUM's header lacks "Num", REMOTE_SECURITY_TYPE_ID's "ID").
func init() {
	add := func(name string, lines [4]string, value func(*Report) (string, bool)) {
		omniOutputs[name] = omniOutput{lines, value}
	}
	// OUTPUT_NONE is a one-space column; OUTPUT_END ends its block (see
	// parseSelection); RESULT_BRAND is the global -B tag in double quotes,
	// without -B no value at all (display_value NULL).
	add("OUTPUT_NONE", [4]string{" "}, constValue(" "))
	add("OUTPUT_END", [4]string{"This", "Is", "The", "End"}, func(*Report) (string, bool) { return "", false })
	add("RESULT_BRAND", [4]string{"Result", "Tag"}, func(r *Report) (string, bool) {
		return `"` + r.Config.ResultBrand + `"`, r.Config.ResultBrand != ""
	})

	add("SOURCE_PORT", [4]string{"Source", "Port"}, func(r *Report) (string, bool) { return fmtInt(r.Config.LocalDataPort) })
	add("SOURCE_ADDR", [4]string{"Source", "Address"}, func(r *Report) (string, bool) { return r.sourceAddr(), true })
	add("SOURCE_FAMILY", [4]string{"Source", "Family"}, func(r *Report) (string, bool) {
		return fmtInt(addressFamilyNumber(r.Config.LocalDataFamily))
	})
	add("DEST_PORT", [4]string{"Destination", "Port"}, func(r *Report) (string, bool) { return fmtInt(r.Config.RemoteDataPort) })
	// remote_data_address is NULL without a test-specific -H.
	add("DEST_ADDR", [4]string{"Destination", "Address"}, func(r *Report) (string, bool) {
		return r.Config.DataHost, r.Config.DataHost != ""
	})
	add("DEST_FAMILY", [4]string{"Destination", "Family"}, func(r *Report) (string, bool) {
		return fmtInt(addressFamilyNumber(r.Config.RemoteDataFamily))
	})

	for _, side := range []string{"Local", "Remote"} {
		up := strings.ToUpper(side)
		for _, f := range []string{"Name", "Version", "Firmware", "Bus"} {
			add(up+"_DRIVER_"+strings.ToUpper(f), [4]string{side, "Driver", f}, constValue(deprecatedValue))
		}
		for _, f := range []string{"Subdevice", "Device", "Subvendor", "Vendor"} {
			add(up+"_INTERFACE_"+strings.ToUpper(f), [4]string{side, "Interface", f}, constValue(unknownIfID))
		}
		add(up+"_INTERFACE_NAME", [4]string{side, "Interface", "Name"}, constValue(deprecatedValue))
		add(up+"_INTERFACE_SLOT", [4]string{side, "Interface", "Slot"}, constValue(deprecatedValue))
		add(up+"_SECURITY_ENABLED", [4]string{side, "OS", "Security", "Enabled"}, constValue(deprecatedValue))
		add(up+"_SECURITY_TYPE", [4]string{side, "OS", "Security", "Type"}, constValue(deprecatedValue))
		add(up+"_SECURITY_SPECIFIC", [4]string{side, "OS", "Security", "Specific"}, constValue(deprecatedValue))
		add(up+"_SOCKET_PRIO", [4]string{side, "Socket", "Priority"}, constValue("-1"))
		local := side == "Local"
		add(up+"_SOCKET_TOS", [4]string{side, "Socket", "TOS"}, func(r *Report) (string, bool) {
			if local {
				return r.Config.LocalTOS.output(), true
			}
			return r.Config.RemoteTOS.output(), true
		})
		// An empty char array in stock without -F: a value, empty.
		add(up+"_FILL_FILE", [4]string{side, "Fill", "File"}, func(r *Report) (string, bool) {
			if local {
				return r.Config.FillFile, true
			}
			return r.Config.RemoteFillFile, true
		})
	}
	// Never-assigned ints: 0.
	add("LOCAL_SECURITY_ENABLED_NUM", [4]string{"Local", "OS", "Security", "Enabled Num"}, constValue("0"))
	add("LOCAL_SECURITY_TYPE_ID", [4]string{"Local", "OS", "Security", "Type ID"}, constValue("0"))
	add("REMOTE_SECURITY_ENABLED_NUM", [4]string{"Remote", "OS", "Security", "Enabled"}, constValue("0"))
	add("REMOTE_SECURITY_TYPE_ID", [4]string{"Remote", "OS", "Security", "Type"}, constValue("0"))

	// The server's system: stock netserver answers DO_SYSINFO with
	// "Deprecated" (ours too) and stock netperf prints that.
	for _, f := range []string{"Sysname", "Release", "Version", "Machine"} {
		add("REMOTE_"+strings.ToUpper(f), [4]string{"Remote", f}, constValue(deprecatedValue))
	}
	add("REMOTE_SYSTEM_MODEL", [4]string{"Remote", "System", "Model"}, constValue(deprecatedValue))
	add("REMOTE_CPU_MODEL", [4]string{"Remote", "CPU", "Model"}, constValue(deprecatedValue))
	add("REMOTE_CPU_FREQUENCY", [4]string{"Remote", "CPU", "Frequency", "MHz"}, constValue("0"))
	// This host's, as far as Linux tells it (stock: "Deprecated" and 0).
	add("LOCAL_SYSTEM_MODEL", [4]string{"Local", "System", "Model"}, func(*Report) (string, bool) { return localSystemModel(), true })
	add("LOCAL_CPU_MODEL", [4]string{"Local", "CPU", "Model"}, func(*Report) (string, bool) { return localCPUInfo().model, true })
	add("LOCAL_CPU_FREQUENCY", [4]string{"Local", "CPU", "Frequency", "MHz"}, func(*Report) (string, bool) { return fmtInt(localCPUInfo().mhz) })
	setLocalInterfaceOutputs()
}
