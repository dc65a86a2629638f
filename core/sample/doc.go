// Package sample turns a model's logits into the next token.
//
// A Sampler is created per request from Params and applies, in this order,
// repetition/presence/frequency penalties over a window of recently accepted
// tokens, temperature, top-k, top-p and min-p (see Sampler.Distribution for
// why that order). Temperature 0 is greedy decoding, and so is any
// temperature below MinTemperature (1e-5), whose 1/T would otherwise
// overflow or leave every weight but the argmax's at 0. Every parameter
// has a documented finite range (the constants beside Params); New rejects
// values outside it.
//
// No path depends on luck to finish: the rejection sampler behind Sample
// gives up after a fixed number of proposals and falls back to an exact
// inverse-CDF draw, so a step costs a bounded amount of work whatever the
// logits hold (NaN and infinities included).
//
// Two views of the same pipeline are offered. Sample draws a token and is
// what plain decoding calls once per step; Distribution exposes the final
// distribution (sparse when truncated, sorted by probability) together with
// Uniform, the sampler's own random stream, so that a speculative-decoding
// verifier can compute acceptance ratios p_target/p_draft and draw from the
// residual distribution while staying on the request's reproducible stream.
//
// Randomness comes from a per-sampler xoshiro256** generator, seeded from
// Params.Seed when HasSeed is set (same seed, same logits, same tokens) and
// from crypto/rand otherwise.
//
// Cost: the vocabulary of the default model has 49,152 entries. Greedy is
// one pass; top-k is one pass with a K-element heap and a sort of K; min-p
// alone cuts in logit space before any exponential; temperature alone
// computes the weights and draws without sorting. Only Distribution with no
// truncation at all sorts the whole vocabulary.
package sample
