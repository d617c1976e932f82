package mpls

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on amd64 and arm64.
const hugePage = 2 << 20

// mapIndex returns n zeroed words for a FIB index, 64-byte aligned. An
// index of a few MiB or more gets its own mapping, asked to be backed by
// huge pages (madvise MADV_HUGEPAGE, which Linux honours when transparent
// huge pages are "always" or "madvise"): a lookup into a table of a
// million routes touches random places of 10 MiB or more, and with 4 KiB
// pages nearly every one misses the TLB (a page walk, far costlier under
// a hypervisor's nested paging). mapped is the mapping (nil when the
// words are on the Go heap), for unmapIndex once no lookup can use it.
func mapIndex(n int) (words []uint32, mapped []byte) {
	if n*4 < hugePage/2 {
		return heapIndex(n), nil
	}
	// Whole huge pages, from a huge page boundary: a partial page at
	// the end would be backed by 4 KiB pages.
	size := (n*4+hugePage-1)&^(hugePage-1) + hugePage
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return heapIndex(n), nil
	}
	off := (hugePage - uintptr(unsafe.Pointer(unsafe.SliceData(m)))%hugePage) % hugePage
	_ = unix.Madvise(m[off:], unix.MADV_HUGEPAGE) // a hint: without it, 4 KiB pages
	return unsafe.Slice((*uint32)(unsafe.Pointer(&m[off])), n), m
}

// unmapIndex releases mappings of mapIndex.
func unmapIndex(mapped [2][]byte) {
	for _, m := range mapped {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
}
