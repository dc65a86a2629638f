//go:build race

package modelfile

const raceEnabled = true
