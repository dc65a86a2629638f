//go:build !race

// Package race says whether the race detector is on, for the tests that
// skip what it makes too slow (real models' passes, long statistical
// runs): one definition instead of a pair of files in every package.
package race

// Enabled reports whether the program was built with the race detector.
const Enabled = false
