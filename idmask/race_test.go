//go:build race

package idmask

const raceEnabled = true
