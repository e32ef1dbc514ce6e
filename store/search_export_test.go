package store

import "testing"

// SetBroadSearchWord makes every word with n index rows or more count as
// broad until the test ends, so that a small database takes the plan a
// large one takes for common words.
func SetBroadSearchWord(t *testing.T, n int) {
	old := broadWord
	broadWord = n
	t.Cleanup(func() { broadWord = old })
}
