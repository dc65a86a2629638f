//go:build race

package sample

// raceEnabled lets the slowest statistical test skip under the race
// detector, which slows it twentyfold and has nothing to find in it.
const raceEnabled = true
