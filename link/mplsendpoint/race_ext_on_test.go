//go:build race

package mplsendpoint_test

// raceDetector: the tests run under the race detector (see
// runTransfer's one tolerated mtu_exceeded).
const raceDetector = true
