package lsrrate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// measure runs one measurement at one frame size.
func measure(ctx context.Context, opts *Options, cfg string, t *topology, fw forwarder,
	g frameGenerator, c frameCounter, wantLabel uint32, size int, rate float64, h hooks) (Result, error) {
	if err := warmUp(ctx, fw, g, c); err != nil {
		return Result{}, err
	}
	fw.mark()
	before, err := takeSnapshot(t, fw)
	if err != nil {
		return Result{}, err
	}
	frames, gr, err := generate(ctx, opts, g, c, rate)
	if err != nil {
		return Result{}, err
	}
	after, err := takeSnapshot(t, fw)
	if err != nil {
		return Result{}, err
	}
	samples, err := c.samples(numSamples)
	if err != nil {
		return Result{}, err
	}
	if frames > 0 && len(samples) == 0 {
		return Result{}, fmt.Errorf("%d frames counted but none could be read back to check", frames)
	}
	for _, s := range samples {
		if err := checkSample(s, wantLabel); err != nil {
			return Result{}, fmt.Errorf("frame counted at the sink: %w", err)
		}
	}
	if h.samples != nil {
		h.samples(cfg, size, samples)
	}
	if h.sinkRX != nil {
		h.sinkRX(cfg, size, after.dev.sink.rxPackets-before.dev.sink.rxPackets)
	}

	r := Result{Config: cfg, FrameSize: size, Frames: frames, Sent: gr.sent, Generator: g.kind(),
		IngressDrops: fw.ingressDrops(after.dev.in.rxDropped - before.dev.in.rxDropped)}
	secs := gr.elapsed.Seconds()
	if secs > 0 {
		r.PPS = float64(frames) / secs
		r.OfferedPPS = float64(r.Sent) / secs
	}
	if frames > 0 {
		r.CPUSecondsPerMpkt = (after.cpu - before.cpu).Seconds() / (float64(frames) / 1e6)
	}
	d0, d1 := before.dev, after.dev
	opts.progress("%s %d B: %s generator, rate %s: sent %d (%.0f pps, %d sendmmsg refused) counted %d (%.0f pps, %.1f%% of sent), %d checked; "+
		"forwarder CPU %.2fs, softirq %.2fs, generator thread %.2fs in %.2fs; "+
		"devices: gen tx %d dropped %d, LSR in rx %d dropped %d, LSR out tx %d dropped %d, sink rx %d; %s",
		cfg, size, g.kind(), rateString(rate), gr.sent, float64(gr.sent)/secs, gr.refused, frames, r.PPS, pct(frames, gr.sent), len(samples),
		(after.cpu - before.cpu).Seconds(), (after.softirq - before.softirq).Seconds(), gr.cpu.Seconds(), secs,
		d1.gen.txPackets-d0.gen.txPackets, d1.gen.txDropped-d0.gen.txDropped,
		d1.in.rxPackets-d0.in.rxPackets, d1.in.rxDropped-d0.in.rxDropped,
		d1.out.txPackets-d0.out.txPackets, d1.out.txDropped-d0.out.txDropped,
		d1.sink.rxPackets-d0.sink.rxPackets, fw.describe()+"; "+c.describe())
	return r, nil
}

// warmUp sends a few frames through, so the LSR has the sink's MAC and the
// path is known to work before the clock starts, then zeroes and arms the
// sink's counter.
func warmUp(ctx context.Context, fw forwarder, g frameGenerator, c frameCounter) error {
	fw.mark()
	if err := g.send(8); err != nil {
		return fmt.Errorf("warm-up send: %w", err)
	}
	deadline := time.Now().Add(warmupTimeout)
	for got := uint64(0); got == 0; {
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
		n, err := c.take()
		if err != nil {
			return err
		}
		got += n
		if got == 0 && time.Now().After(deadline) {
			return fmt.Errorf("no frame reached the sink within %v of the warm-up (forwarder: %s)", warmupTimeout, fw.describe())
		}
	}
	if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
		return err
	}
	if _, err := c.take(); err != nil { // zero the counter
		return err
	}
	if err := c.drain(); err != nil {
		return err
	}
	return c.arm(numSamples)
}

// snapshot is what measure reads before and after a run: the devices'
// counters, the machine's softirq time and the forwarder's CPU time.
type snapshot struct {
	dev     topoStats
	softirq time.Duration
	cpu     time.Duration
}

func takeSnapshot(t *topology, fw forwarder) (snapshot, error) {
	var s snapshot
	var err error
	if s.dev, err = t.deviceStats(); err != nil {
		return s, err
	}
	if s.softirq, err = softirqTime(); err != nil {
		return s, err
	}
	s.cpu, err = fw.cpu()
	return s, err
}

// generate runs the generator for opts.Seconds at rate while counting what
// reaches the sink, then waits for the last frames to settle; a cancelled
// ctx stops the generator early.
func generate(ctx context.Context, opts *Options, g frameGenerator, c frameCounter, rate float64) (uint64, genStats, error) {
	var stop atomic.Bool
	type genResult struct {
		st  genStats
		err error
	}
	done := make(chan genResult, 1)
	go func() {
		st, err := g.run(time.Duration(opts.Seconds*float64(time.Second)), rate, &stop)
		done <- genResult{st, err}
	}()
	var frames uint64
	var gr genResult
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	cancelled := ctx.Done()
wait:
	for {
		select {
		case <-cancelled:
			stop.Store(true)
			cancelled = nil // a closed channel would spin this loop
		case gr = <-done:
			break wait
		case <-tick.C:
			n, err := c.take()
			if err != nil {
				stop.Store(true)
				<-done
				return 0, genStats{}, err
			}
			frames += n
		}
	}
	if gr.err != nil {
		return 0, genStats{}, gr.err
	}
	if err := sleepCtx(ctx, settle); err != nil {
		return 0, genStats{}, err
	}
	n, err := c.take()
	return frames + n, gr.st, err
}

// rateString formats a generator rate for the progress line.
func rateString(rate float64) string {
	if rate == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.0f pps", rate)
}

// pct is 100*a/b, 0 for b == 0.
func pct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
