// Package spec is lmstream's speculative decoding: token trees, drafters,
// AdaServe's SLO-customized selection, and tree verification (greedy and
// lossless sampling). It knows nothing of the model: a draft model plugs in
// through DraftModel, the target's distributions arrive through Targets, and
// core/loop drives one iteration as Plan → forward pass → Verify*.
//
// # Speculative decoding with token trees
//
// A forward pass of a memory-bound model costs about the same for one token
// as for a few dozen: the weights are streamed once either way. Speculative
// decoding spends that slack. A cheap drafter guesses continuations; the
// target model scores all of them in one pass; every guess the target agrees
// with is a token gained. Guesses form a tree (Tree): the root is the
// sequence's newest token, each path below it a candidate continuation.
// Tree.AppendBatch lays the tree into the forward-pass batch — parents as
// in-batch indices, positions committed-length+depth, siblings sharing a
// position — and each token attends to the committed cache plus its
// ancestors (Tree.AppendAncestors, Tree.AncestorMask). Verification returns
// the accepted path; the KV cache keeps exactly those entries.
//
// The number of tokens an iteration yields is random. If f(v) is the
// probability that the target accepts the whole path from the root to v (the
// path probability; f(root) = 1, since the bonus token after the accepted
// path is always produced), then the expected yield of a tree T is
//
//	E[acc(T)] = Σ_{v∈T} f(v).
//
// f is unknown before verification; drafters approximate it by the product
// of their own conditional probabilities along the path (Node.Prob).
//
// # Drafters
//
// BeamDrafter runs a DraftModel by beam search, batched across requests: one
// model call per tree layer, each request keeping the w most probable paths
// per layer (depth d, width w), or SpecInfer's fixed branching (Shape.Branch).
// NGramDrafter needs no model: it matches the context's recent suffix in an
// incrementally maintained hash-chain index of the request's own tokens
// (prompt and output; optionally a shared index of earlier outputs) and
// proposes what followed, with count-based probabilities and back-off to
// shorter suffixes, each match order's probabilities calibrated by how its
// predictions fared on the tokens the request emitted. A request can turn
// speculation off (Seq.NoSpec).
//
// # AdaServe: SLO-customized selection
//
// AdaServe (Li et al., "AdaServe: Accelerating Multi-SLO LLM Serving with
// SLO-Customized Speculative Decoding", arXiv 2501.12162) serves requests
// with different time-per-output-token SLOs in one batch by deciding, per
// iteration, how many tree nodes each request verifies. The hardware gives a
// budget B of tokens per verification pass (the knee of the forward pass's
// cost curve: Calibrate). For request r with SLO s, l the time since its
// first token, o the tokens generated after the first and t_spec the
// expected duration of this iteration (Timing), its average TPOT after the
// iteration stays within s iff it gains at least
//
//	A(r) = (l + t_spec)/s − o
//
// tokens (Target). Both l and o start at the first token because the TPOT
// that SLO attainment is judged by does: (last − first)/(generated − 1), the
// usage's tpot_ms (the paper's l and o likewise start at the first decoding
// step, after the prefill's token). With the expectation above, the problem becomes: choose
// trees T_i with Σ|T_i| ≤ B and Σ_{v∈T_i} f(v) ≥ A(r_i), maximizing
// Σ_i Σ_{v∈T_i} f(v). Because f never increases from parent to child, taking
// nodes greedily by f is ancestor-closed and optimal, which gives the two
// phases of Selector.Select:
//
//  1. SLO-customized selection: requests in order of A (Config.Order: the
//     paper serves the furthest behind first; the public code the reverse)
//     each take their own most probable nodes until their expected yield
//     reaches A_cap(r) = min(A(r), d+1) (no depth-d tree can yield more), or
//     they have taken NMax nodes (so one hopeless request cannot eat the
//     budget), or the budget runs out.
//  2. Throughput-optimized selection: the rest of the budget goes to the most
//     probable remaining nodes across all requests. Requests without an SLO
//     are best effort and only take part here.
//
// Drafting the whole infinite tree is impossible, so speculation and
// selection are decoupled: the drafter builds a candidate tree of depth d and
// width w per request, and selection picks from it. Config.Shape adapts them
// to the load n: d = max(1, min(D_max, ⌈B/n⌉)), w = max(1, min(W_max,
// ⌊B/n⌋)) — a request's share of the budget bounds how deep and wide its
// useful tree can be.
//
// The paper's setting is a GPU, whose verify pass costs about the same
// at 1 and 64 tokens, so t_spec does not depend on what is selected. On a
// CPU a speculative iteration (draft steps, a larger pass) is longer than
// a plain one and every request in the batch waits for it, so
// Scheduler.Plan adds a guard (Guard): AdaServe's speculation is put off
// for an iteration that would leave a request behind its SLO at a slower
// pace than plain decoding, judging a drafting request by the tokens its
// speculation has been emitting. A drafter that must first feed a
// request's context to its own model (a CatchUpDrafter: a draft model's
// cache reading a new request's prompt) starts drafting for it only in an
// iteration every request can wait that pass for (HoldCatchUps). The
// baselines keep the paper's definitions, unguarded.
//
// The same slack, SLO·(o+1) − l (how long a request may wait for its next
// token and stay on pace), shapes the rest of an AdaServe iteration. The
// prompt chunk beside the decoding requests is the largest that keeps
// them on pace (PrefillChunk), down to what the prompts need for their
// TTFT deadlines (PromptFloor), and a request whose SLO and slack cover
// two iterations sits out one that would leave another short of slack
// (SitOut): on a CPU its root costs the others time, and on a GPU under
// load it takes budget their trees need. It holds its slot longer too, so
// nobody sits out while a request waiting for a slot could miss its
// first-token deadline (Queue.AtRisk).
//
// A CPU's verified token is not free either, so a node is selected only
// where its path probability pays for its place in the pass: MinProb is
// priced on the curve's first extra tokens, and Config.Floor raises it
// slot by slot past them, where a CPU's pass turns compute-bound and
// dearer per token (MinProb, Floors). Each request's Payoff then checks
// the outcome, its time per token speculating against plain decoding's,
// and decodes plainly for a while where speculation lost (a
// StandbyDrafter may still draft for it meanwhile, where a cheap tree
// beats plain decoding on its own); a runtime that
// batches several requests charges a speculating one what its drafts cost
// the others (core/engine's passCharge), since they all wait for the pass.
//
// The paper's worked example (its Figure 5: budget 8, two requests, w = 2,
// d = 3, A_cap = 0.6 and 0.8) is reproduced in TestFigure5. The figure counts
// only draft tokens toward A while the paper's Algorithm 2 counts the root's
// certain token too; Config.ExcludeRoot selects the figure's reading, and the
// default (Algorithm 2, the one consistent with the d+1 cap) yields the same
// trees for A = 1.6 and 1.8.
//
// The paper's baselines are policies of the same code (Config.Policy):
// Incremental (no speculation), SpecInfer (a fixed ⟨1,1,3,1,1,1,1,1⟩ tree for
// everyone, ignoring the budget), EqualGreedy (B split equally, each request
// greedy in its share) and GlobalGreedy (the top B−n nodes across requests:
// AdaServe without its SLO phase).
//
// # Verification
//
// VerifyGreedy walks the tree following the target's argmax and appends the
// argmax after the last accepted node: the output is token-identical to plain
// greedy decoding. VerifySample implements recursive rejection sampling for
// deterministically chosen candidates: at a node with target distribution p,
// try each child x in order, accept it with probability p(x), otherwise set
// p(x) = 0 and renormalise; if every child is rejected sample the bonus
// token from what remains, and after an accepted leaf sample it from the
// leaf's distribution. Each emitted token is then distributed exactly as the
// target's (tempered, truncated) distribution given the tokens before it;
// TestSamplingPreservesDistribution checks this with chi-square tests of the
// first two emitted tokens over every tree shape the scheduler can produce up
// to depth 4 and width 3, and TestSamplingJointDistribution with chi-square
// tests of the joint distribution of every position one verification can
// emit (tree depth + 1), on a target that depends on the whole prefix and on
// chains, branching and beam trees, drafts unlike the target and duplicate
// siblings. Both check that the same test rejects wrong rules (always
// accepting, the bug of the public AdaServe implementation; rejecting without
// renormalising; and in the joint test also a bonus from the full p or from
// the draft, and rules exact only above depth 2 or 3, which no two-token test
// can see).
// Randomness comes from an injected Source.
package spec
