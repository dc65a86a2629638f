package grammar

import (
	"container/heap"
	"fmt"
)

// LimitError is a grammar that parses but that the matcher could not
// follow within its limits everywhere its sentences go: refusing it at
// compile time is what keeps a request from being accepted and then
// failing in the middle of its stream. It names the rule where the limit
// is reached.
type LimitError struct {
	Rule string
	Msg  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("grammar: rule %q: %s", e.Rule, e.Msg)
}

// manyWays is where counts of parses saturate: past it only "more than
// MaxBranches" matters, and products of two saturated counts still fit
// in an int64.
const manyWays = 1 << 20

func satAdd(a, b int64) int64 { return min(a+b, manyWays) }
func satMul(a, b int64) int64 { return min(a*b, manyWays) }

// unreachable is the height of a rule that derives no finite text.
const unreachable = 1 << 30

// altRef is one alternative of one rule.
type altRef struct{ rule, alt int32 }

// analyze checks the parsed rules and sets each element's need. Every
// step is linear in the number of elements (a heap makes the heights
// n log n), so compiling costs what the grammar's size says, whatever its
// shape:
//
//   - left recursion is refused: expand would never end;
//   - a position from which one expansion opens more than MaxBranches
//     stacks is refused: the matcher would find the state there dead;
//   - each rule's height is the fewest frames a stack needs to finish it
//     (Knuth's generalisation of Dijkstra's algorithm: an alternative's
//     height is at least each of its rules'), and each element's need
//     follows from the heights of the rules after it, so that expand can
//     leave out alternatives that could not finish within MaxDepth. A
//     grammar whose root cannot finish within MaxDepth (or at all) is
//     refused.
//
// Each pass counts a step per rule and per element in b.
func (g *Grammar) analyze(b *budget) error {
	n := len(g.rules)
	// visit counts one pass's visit of rule r in b.
	visit := func(r int) error { return b.step(1 + len(g.rules[r])) }
	// Each rule's occurrences: the alternatives that reference it, once
	// per reference.
	uses := make([][]altRef, n)
	for r, alts := range g.rules {
		if err := visit(r); err != nil {
			return err
		}
		for a, seq := range alts {
			for _, e := range seq {
				if e.ref >= 0 {
					uses[e.ref] = append(uses[e.ref], altRef{int32(r), int32(a)})
				}
			}
		}
	}

	// Which rules can match nothing: an alternative is nullable once all
	// its elements are, counted down as rules turn out nullable.
	nullable := make([]bool, n)
	left := make([][]int, n) // per alternative: elements not yet known nullable; -1 has a class
	var work []int32
	for r, alts := range g.rules {
		if err := visit(r); err != nil {
			return err
		}
		left[r] = make([]int, len(alts))
		for a, seq := range alts {
			for _, e := range seq {
				if e.ref < 0 {
					left[r][a] = -1
					break
				}
				left[r][a]++
			}
			if left[r][a] == 0 && !nullable[r] {
				nullable[r] = true
				work = append(work, int32(r))
			}
		}
	}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		if err := b.step(1 + len(uses[x])); err != nil {
			return err
		}
		for _, u := range uses[x] {
			if left[u.rule][u.alt] <= 0 {
				continue
			}
			if left[u.rule][u.alt]--; left[u.rule][u.alt] == 0 && !nullable[u.rule] {
				nullable[u.rule] = true
				work = append(work, u.rule)
			}
		}
	}

	order, err := g.startOrder(nullable, b)
	if err != nil {
		return err
	}

	// first[r]: the stacks expanding r opens before its first character,
	// inside r; empty[r]: the ways r matches nothing (each continues into
	// what follows r). In start order, a rule's starting rules are known.
	first := make([]int64, n)
	empty := make([]int64, n)
	for _, r := range order {
		if err := visit(int(r)); err != nil {
			return err
		}
		for _, seq := range g.rules[r] {
			f, pass := int64(0), int64(1)
			for _, e := range seq {
				if e.ref < 0 {
					f, pass = satAdd(f, pass), 0
					break
				}
				f = satAdd(f, satMul(pass, first[e.ref]))
				if pass = satMul(pass, empty[e.ref]); pass == 0 {
					break
				}
			}
			first[r] = satAdd(first[r], f)
			empty[r] = satAdd(empty[r], pass)
		}
	}
	// At every position, the stacks one expansion opens inside its
	// alternative: those of the element there, and of the ones after it
	// for each way the element can match nothing.
	for r, alts := range g.rules {
		if err := visit(r); err != nil {
			return err
		}
		for _, seq := range alts {
			f, pass := int64(0), int64(1) // at the alternative's end
			for i := len(seq) - 1; i >= 0; i-- {
				if e := &seq[i]; e.ref < 0 {
					f, pass = 1, 0
				} else {
					f, pass = satAdd(first[e.ref], satMul(empty[e.ref], f)), satMul(empty[e.ref], pass)
				}
				if f > MaxBranches {
					return &LimitError{Rule: g.names[r], Msg: fmt.Sprintf("the output may go on in %s ways at once here, and at most %d are followed "+
						"(many optional parts in a row, or ambiguous alternatives)", countText(f), MaxBranches)}
				}
			}
		}
	}

	h, err := g.heights(uses, b)
	if err != nil {
		return err
	}
	// need, from the back of each alternative: the most any element from
	// here on adds above this frame. A reference before the end stands on
	// the frame (its rule's height above it); one at the end replaces it.
	for r, alts := range g.rules {
		if err := visit(r); err != nil {
			return err
		}
		for _, seq := range alts {
			need := int32(0)
			for i := len(seq) - 1; i >= 0; i-- {
				e := &seq[i]
				switch {
				case e.ref >= 0:
					add := h[e.ref]
					if i == len(seq)-1 {
						add--
					}
					need = max(need, min(add, MaxDepth+1))
				case e.matchesNothing():
					need = MaxDepth + 1 // never matched: nothing here on finishes
				}
				e.need = need
			}
		}
	}
	switch root := g.root; {
	case h[root] >= unreachable:
		return &LimitError{Rule: g.names[root], Msg: "it matches no text: every alternative leads into rules that never finish, or into a character class that matches no character"}
	case h[root] > MaxDepth:
		return &LimitError{Rule: g.names[root], Msg: fmt.Sprintf("its shortest sentence nests rules %d deep; at most %d are followed", h[root], MaxDepth)}
	}
	return nil
}

func countText(f int64) string {
	if f >= manyWays {
		return fmt.Sprintf("more than %d", manyWays)
	}
	return fmt.Sprint(f)
}

// startOrder refuses a rule that can reach itself without consuming a
// character (directly, through rules that start it, or past rules that
// can match nothing): the matcher would expand it forever. Otherwise it
// returns the rules ordered so that the rules each one can start with
// come before it.
func (g *Grammar) startOrder(nullable []bool, b *budget) ([]int32, error) {
	n := len(g.rules)
	// starts[r]: the rules r can begin with.
	starts := make([][]int32, n)
	for r, alts := range g.rules {
		if err := b.step(1 + len(alts)); err != nil {
			return nil, err
		}
		for _, alt := range alts {
			for _, e := range alt {
				if e.ref < 0 {
					break
				}
				starts[r] = append(starts[r], e.ref)
				if !nullable[e.ref] {
					break
				}
			}
		}
	}
	const (
		unseen = iota
		active
		done
	)
	mark := make([]uint8, n)
	order := make([]int32, 0, n)
	type item struct{ r, i int32 }
	for s := range n {
		if mark[s] != unseen {
			continue
		}
		stack := []item{{int32(s), 0}}
		mark[s] = active
		for len(stack) > 0 {
			if err := b.step(1); err != nil {
				return nil, err
			}
			top := &stack[len(stack)-1]
			if int(top.i) >= len(starts[top.r]) {
				mark[top.r] = done
				order = append(order, top.r)
				stack = stack[:len(stack)-1]
				continue
			}
			next := starts[top.r][top.i]
			top.i++
			switch mark[next] {
			case active:
				return nil, &SyntaxError{Msg: fmt.Sprintf("rule %q is left-recursive: it can reach itself before matching a character (a rule that starts with itself, or a repetition of something that can match nothing)", g.names[next])}
			case unseen:
				mark[next] = active
				stack = append(stack, item{next, 0})
			}
		}
	}
	return order, nil
}

// heights computes each rule's height: the fewest frames a stack needs
// above the one under the rule to match a whole text of it, counting
// the rule's own frame (0 for a rule that can match nothing, unreachable
// for one that never finishes). An alternative's height is one more than
// the most its elements add (elemAdd); it is known once all its rules'
// are, and never less than any of theirs, so taking rules in increasing
// height order settles each one when it is first taken.
func (g *Grammar) heights(uses [][]altRef, b *budget) ([]int32, error) {
	n := len(g.rules)
	h := make([]int32, n)
	for r := range h {
		h[r] = unreachable
	}
	settled := make([]bool, n)
	unknown := make([][]int32, n) // per alternative: references whose rule is not settled yet
	q := &heightQueue{}
	altHeight := func(r, a int32) int32 {
		seq := g.rules[r][a]
		if len(seq) == 0 {
			return 0
		}
		most := int32(0)
		for i, e := range seq {
			if e.ref < 0 {
				if e.matchesNothing() {
					return unreachable // a class that matches no character: never finishes
				}
				continue
			}
			add := h[e.ref]
			if i == len(seq)-1 {
				add-- // the rule's frame replaces this one
			}
			most = max(most, add)
		}
		return min(1+most, unreachable)
	}
	for r, alts := range g.rules {
		unknown[r] = make([]int32, len(alts))
		for a, seq := range alts {
			for _, e := range seq {
				if e.ref >= 0 {
					unknown[r][a]++
				}
			}
			if unknown[r][a] == 0 {
				if ah := altHeight(int32(r), int32(a)); ah < unreachable {
					heap.Push(q, heightItem{int32(r), ah})
				}
			}
		}
	}
	for q.Len() > 0 {
		if err := b.step(1); err != nil {
			return nil, err
		}
		it := heap.Pop(q).(heightItem)
		if settled[it.rule] {
			continue
		}
		settled[it.rule] = true
		h[it.rule] = it.h
		for _, u := range uses[it.rule] {
			if unknown[u.rule][u.alt]--; unknown[u.rule][u.alt] == 0 && !settled[u.rule] {
				if ah := altHeight(u.rule, u.alt); ah < unreachable {
					heap.Push(q, heightItem{u.rule, ah})
				}
			}
		}
	}
	return h, nil
}

type heightItem struct{ rule, h int32 }

type heightQueue []heightItem

func (q heightQueue) Len() int           { return len(q) }
func (q heightQueue) Less(i, j int) bool { return q[i].h < q[j].h }
func (q heightQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *heightQueue) Push(x any)        { *q = append(*q, x.(heightItem)) }
func (q *heightQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
