//go:build !race

package mplsendpoint_test

// raceDetector: the tests run under the race detector.
const raceDetector = false
