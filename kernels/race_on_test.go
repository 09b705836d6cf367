//go:build race

package kernels

// raceOn says the tests run under the race detector.
const raceOn = true
