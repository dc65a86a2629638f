package tokenizer

// ResetCache empties the word cache, so benchmarks can measure the merge
// loop itself rather than cache hits.
func ResetCache(t *Tokenizer) {
	if t.cache != nil {
		t.cache = newWordCache(wordCacheSize)
	}
}
