//go:build linux

package afpacket

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How a ring-mode queue waits and kicks.
//
// Receiving: the queue's goroutine parks in the Go netpoller until the
// ring's next slot is ours (the kernel wakes the socket once per frame),
// then delivers what is ready under rxMu. With Options.BusyPoll it then
// spins before it parks again: one goroutine at a time in the process (the
// busy group, which every ring queue with BusyPoll joins) checks the next
// slot of every member's ring and delivers a frame that arrives on any of
// them at once, with no wake-up; it stops BusyPoll after the last frame it
// saw. A node forwarding a request/response flow between two links sees
// the response arrive on the other link, which is why the spin covers
// every link and not only the spinner's own. The queue's own goroutine is
// still woken for each frame, finds it delivered (or delivers it, if the
// spinner missed it), and parks: nothing depends on the spinner. A round
// of the spin that found nothing yields the CPU (sched_yield), so that on
// a machine with no core to spare the spinner does not hold a core the
// processes at either end of the flow are waiting for.
//
// With Options.BusyPollAdaptive a queue spins only when a frame is likely
// to come within BusyPoll: each batch the group delivers tells the queue
// that delivered the previous one how long it was followed by nothing
// (gapAfter), and a queue spins after a batch only if that gap was shorter
// than BusyPoll the last time. Through a node, the request a client sends
// is followed by its response within the server's turnaround, the
// response by nothing until the client's next request: the node spins for
// responses only, and a lone frame after a quiet spell never starts a
// spin.
//
// Sending: the transmit socket is blocking and so stays out of the Go
// netpoller (registered, every frame sent woke it with an EPOLLOUT edge
// that nobody waited for). A kick is a raw sendto(MSG_DONTWAIT): it never
// blocks, and a raw system call does not wake the runtime's sysmon thread
// as every runtime-announced system call of a process that was idle does
// (one futex wake-up of a second thread, and its sleeps, per forwarded
// frame). A writer that finds the ring full waits in ppoll for POLLOUT,
// txWaitSlice at a time, rechecking whether the endpoint closed.

// txWaitSlice bounds one ppoll of a writer waiting for a transmit slot, so
// that it notices Close.
const txWaitSlice = 10 * time.Millisecond

// errClosing is what a kick returns once Close has begun.
var errClosing = errors.New("afpacket: endpoint closed")

// busyGroup is every ring queue with Options.BusyPoll in the process.
var busyGroup struct {
	mu       sync.Mutex
	members  atomic.Pointer[[]*queue]
	spinning atomic.Bool // a goroutine is spinning over the members
	// lastQ delivered the group's last batch, at lastAt (busyClock).
	lastQ  atomic.Pointer[queue]
	lastAt atomic.Int64
}

// busyEpoch is the origin of busyClock.
var busyEpoch = time.Now()

// busyClock returns monotonic nanoseconds since busyEpoch.
func busyClock() int64 { return int64(time.Since(busyEpoch)) }

// noteBatch records that q just delivered a batch: the queue that
// delivered the group's previous batch learns how long it was followed by
// nothing (its gapAfter, Options.BusyPollAdaptive's guess). Two queues
// noting at once may pair one's queue with the other's time: a guess
// slightly off, never a wrong delivery.
func (q *queue) noteBatch() {
	now := busyClock()
	prev := busyGroup.lastQ.Swap(q)
	prevAt := busyGroup.lastAt.Swap(now)
	if prev != nil {
		prev.gapAfter.Store(now - prevAt)
	}
}

// expectsSoon reports whether, the last time, the group's next frame came
// within q.busyPoll of q's batch.
func (q *queue) expectsSoon() bool { return q.gapAfter.Load() < int64(q.busyPoll) }

// joinBusyGroup adds q to the busy group.
func joinBusyGroup(q *queue) {
	busyGroup.mu.Lock()
	defer busyGroup.mu.Unlock()
	var old []*queue
	if p := busyGroup.members.Load(); p != nil {
		old = *p
	}
	m := append(append(make([]*queue, 0, len(old)+1), old...), q)
	busyGroup.members.Store(&m)
}

// leaveBusyGroup removes q from the busy group. A spinner may still hold
// the old list: it reads q's ring only under q.rxMu, after checking
// q.rxDead.
func leaveBusyGroup(q *queue) {
	busyGroup.mu.Lock()
	defer busyGroup.mu.Unlock()
	old := *busyGroup.members.Load()
	m := make([]*queue, 0, len(old))
	for _, o := range old {
		if o != q {
			m = append(m, o)
		}
	}
	busyGroup.members.Store(&m)
}

// ringLoop is a ring queue's receive loop: wait in the netpoller until
// ready, deliver what is ready (deliver), busy-poll if asked; until the
// socket is closed. Then it unmaps the ring (unmap) under rxMu.
func (q *queue) ringLoop(ready func() bool, deliver func(), unmap func()) {
	q.rxReady, q.rxDeliver = ready, deliver
	if q.busyPoll > 0 {
		joinBusyGroup(q)
	}
	defer func() {
		if q.busyPoll > 0 {
			leaveBusyGroup(q)
		}
		q.rxMu.Lock()
		q.rxDead = true
		unmap()
		q.rxMu.Unlock()
	}()
	// The ring's read position is rxMu's (a spinner may be moving it).
	recv := func(uintptr) bool {
		q.rxMu.Lock()
		defer q.rxMu.Unlock()
		return ready()
	}
	for {
		if err := q.rc.Read(recv); err != nil {
			return // closed
		}
		q.rxMu.Lock()
		deliver()
		q.rxMu.Unlock()
		if q.busyPoll > 0 {
			q.noteBatch()
			if (!q.busyAdaptive || q.expectsSoon()) && busyGroup.spinning.CompareAndSwap(false, true) {
				q.spin()
				busyGroup.spinning.Store(false)
			}
		}
	}
}

// spin checks the next slot of every ring in the busy group and delivers
// what arrives, until q.busyPoll has passed since the last frame or q's
// endpoint closes; with q.busyAdaptive also once it delivered a batch
// whose queue expects nothing soon. A round that found nothing yields the
// CPU (sched_yield): a thread that is ready to run on this core (the
// process that will answer the frame just forwarded, on a machine with no
// core to spare) runs first, so the spin costs only CPU that nothing else
// wants. Its time is counted as q's; each batch it delivers, as the
// delivering queue's (Stats.BusyPollHits), whoever spun.
func (q *queue) spin() {
	members := *busyGroup.members.Load()
	q.rxBusySpins.Add(1)
	now := time.Now()
	last := now // when the last frame was delivered
	for now.Sub(last) < q.busyPoll && !q.ep.Closed() {
		var hits uint64
		more := !q.busyAdaptive // another frame is worth waiting for
		for _, m := range members {
			if m.tryDeliver() {
				hits++
				m.rxBusyHits.Add(1)
				m.noteBatch()
				more = more || m.expectsSoon()
			}
		}
		if hits != 0 && !more {
			q.rxBusyNanos.Add(uint64(time.Since(now)))
			return
		}
		if hits == 0 {
			// A raw system call: sched_yield never blocks (wait.go's
			// comment on kicks says why not a runtime-announced one).
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		t := time.Now()
		q.rxBusyNanos.Add(uint64(t.Sub(now)))
		now = t
		if hits != 0 {
			last = now
		}
	}
}

// tryDeliver delivers what is ready in q's ring unless another goroutine
// is reading it, and reports whether it delivered anything.
func (q *queue) tryDeliver() bool {
	if !q.rxMu.TryLock() {
		return false
	}
	ok := !q.rxDead && q.rxReady()
	if ok {
		q.rxDeliver()
	}
	q.rxMu.Unlock()
	return ok
}

// kickLoop is kick's RawConn.Control callback: kick, and with txWait (or
// a full send buffer) wait for the kernel to free room.
func (q *queue) kickLoop(fd uintptr) {
	for !q.kickOnce(fd) && !q.txClosing.Load() {
		waitTX(fd)
	}
}

// waitTX waits up to txWaitSlice for the transmit socket to take more
// frames (POLLOUT).
func waitTX(fd uintptr) {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	ts := unix.NsecToTimespec(int64(txWaitSlice))
	_, _ = unix.Ppoll(fds[:], &ts, nil)
}
