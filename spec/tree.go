package spec

import "fmt"

// Node is one token of a token tree.
type Node struct {
	Token  int32
	Parent int32 // index of the parent node; -1 for the root
	Depth  int32 // 0 for the root
	// FirstChild and Children locate the node's children: they are the
	// nodes FirstChild .. FirstChild+Children-1 (children are contiguous in
	// the breadth-first linearisation).
	FirstChild int32
	Children   int32
	// Prob approximates the path probability f(v): the probability that the
	// target model accepts every token from the root down to this node. It
	// is the product of the drafter's conditional probabilities along the
	// path; the root's is 1. Acceptance.Scale recalibrates it from Raw.
	Prob float64
	// Raw is the drafter's own path probability, Prob as Add set it
	// before any calibration: what Acceptance compares with what
	// verification accepts.
	Raw float64
}

// Tree is a token tree in breadth-first linearisation. Node 0 is the root:
// the sequence's newest token, which is fed to the model in this iteration
// (it is not yet in the KV cache). Every other node is a drafted
// continuation of its parent.
//
// The linearisation is canonical: parents are non-decreasing in index order
// (so nodes are ordered by depth, a node's children are contiguous, and a
// parent always precedes its children), which is exactly the order a
// queue-based breadth-first walk visits the tree. Add enforces it. Within a
// family, siblings keep the order they were added in; drafters add them by
// descending probability, which is also the order verification tries them.
//
// This order is what the forward pass receives: node i is batch token
// offset+i, its Parent is offset+Parent (or -1 for the root, whose parent is
// the sequence's last committed token), and its position is the cache's
// committed length plus its depth (siblings share a position).
type Tree struct {
	Nodes []Node
}

// Reset makes t a root-only tree.
func (t *Tree) Reset(root int32) {
	t.Nodes = append(t.Nodes[:0], Node{Token: root, Parent: -1, Prob: 1, Raw: 1})
}

// Len is the number of nodes, root included.
func (t *Tree) Len() int { return len(t.Nodes) }

// Root is the root token.
func (t *Tree) Root() int32 { return t.Nodes[0].Token }

// Add appends a child of parent with the given token and path probability
// and returns its index. Parents must be added in non-decreasing order (the
// canonical breadth-first order); Add panics otherwise.
func (t *Tree) Add(parent int, token int32, prob float64) int {
	i := len(t.Nodes)
	if parent < 0 || parent >= i {
		panic(fmt.Sprintf("spec: Tree.Add: parent %d out of range [0,%d)", parent, i))
	}
	if i > 1 && int32(parent) < t.Nodes[i-1].Parent {
		panic(fmt.Sprintf("spec: Tree.Add: parent %d after a child of %d breaks the breadth-first order", parent, t.Nodes[i-1].Parent))
	}
	p := &t.Nodes[parent]
	if p.Children == 0 {
		p.FirstChild = int32(i)
	}
	p.Children++
	t.Nodes = append(t.Nodes, Node{Token: token, Parent: int32(parent), Depth: p.Depth + 1, Prob: prob, Raw: prob})
	return i
}

// Depth is the depth of the deepest node (0 for a root-only tree).
func (t *Tree) Depth() int { return int(t.Nodes[len(t.Nodes)-1].Depth) }

// Child returns the index of parent's child with the given token, or -1.
func (t *Tree) Child(parent int, token int32) int {
	p := t.Nodes[parent]
	for c := p.FirstChild; c < p.FirstChild+p.Children; c++ {
		if t.Nodes[c].Token == token {
			return int(c)
		}
	}
	return -1
}

// Widths appends the number of nodes at each depth 0..Depth to dst.
func (t *Tree) Widths(dst []int) []int {
	for _, n := range t.Nodes {
		for int(n.Depth) >= len(dst) {
			dst = append(dst, 0)
		}
		dst[n.Depth]++
	}
	return dst
}

// AppendBatch appends the tree to a forward-pass batch: its tokens, the
// in-batch index of each token's parent (-1 for the root), and positions
// base+depth, where base is the sequence's committed KV length and offset
// the batch index the root will have.
func (t *Tree) AppendBatch(tokens []int32, parents, pos []int, offset, base int) ([]int32, []int, []int) {
	for _, n := range t.Nodes {
		tokens = append(tokens, n.Token)
		if n.Parent < 0 {
			parents = append(parents, -1)
		} else {
			parents = append(parents, offset+int(n.Parent))
		}
		pos = append(pos, base+int(n.Depth))
	}
	return tokens, parents, pos
}

// AppendAncestors appends node i's ancestors, root first, and i itself: the
// tree nodes token i attends to besides the committed cache.
func (t *Tree) AppendAncestors(dst []int, i int) []int {
	start := len(dst)
	for j := i; j >= 0; j = int(t.Nodes[j].Parent) {
		dst = append(dst, j)
	}
	s := dst[start:]
	for a, b := 0, len(s)-1; a < b; a, b = a+1, b-1 {
		s[a], s[b] = s[b], s[a]
	}
	return dst
}

// MaskWords is the number of uint64 words per row of AncestorMask.
func (t *Tree) MaskWords() int { return (len(t.Nodes) + 63) / 64 }

// AncestorMask writes the tree attention mask: row i (MaskWords words)
// has bit j set when node j is an ancestor of node i or i itself. Rows are
// built from the parent's row, so the whole mask costs O(n·n/64).
func (t *Tree) AncestorMask(dst []uint64) []uint64 {
	w := t.MaskWords()
	n := len(t.Nodes)
	if cap(dst) < n*w {
		dst = make([]uint64, n*w)
	}
	dst = dst[:n*w]
	for i, nd := range t.Nodes {
		row := dst[i*w : (i+1)*w]
		if nd.Parent >= 0 {
			copy(row, dst[int(nd.Parent)*w:int(nd.Parent+1)*w])
		} else {
			clear(row)
		}
		row[i/64] |= 1 << (uint(i) % 64)
	}
	return dst
}

// MaskAllows reports whether row i of a mask from AncestorMask lets node i
// attend to node j.
func MaskAllows(mask []uint64, words, i, j int) bool {
	return mask[i*words+j/64]&(1<<(uint(j)%64)) != 0
}

// Subtree writes into dst the tree made of the nodes of t whose indices are
// listed in keep (ascending, starting with 0, ancestor-closed: every kept
// node's parent is kept). Because t is canonical and keep preserves its
// order, dst is canonical too. It returns false, leaving dst unspecified,
// when keep is not a valid ancestor-closed ascending selection.
func (t *Tree) Subtree(keep []int, dst *Tree) bool {
	if len(keep) == 0 || keep[0] != 0 {
		return false
	}
	// remap[old] = new index; found by binary search over keep since keep
	// is ascending.
	dst.Reset(t.Nodes[0].Token)
	for k := 1; k < len(keep); k++ {
		old := keep[k]
		if old <= keep[k-1] || old >= len(t.Nodes) {
			return false
		}
		np := searchInts(keep[:k], int(t.Nodes[old].Parent))
		if np < 0 {
			return false
		}
		n := t.Nodes[old]
		dst.Add(np, n.Token, n.Prob)
	}
	return true
}

func searchInts(a []int, x int) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(a) && a[lo] == x {
		return lo
	}
	return -1
}

// Validate checks the invariants: a root at 0, parents before children and
// non-decreasing, depths and child ranges consistent.
func (t *Tree) Validate() error {
	if len(t.Nodes) == 0 {
		return fmt.Errorf("empty tree")
	}
	if r := t.Nodes[0]; r.Parent != -1 || r.Depth != 0 {
		return fmt.Errorf("node 0 is not a root: %+v", r)
	}
	prev := int32(0)
	for i := 1; i < len(t.Nodes); i++ {
		n := t.Nodes[i]
		if n.Parent < prev || int(n.Parent) >= i {
			return fmt.Errorf("node %d: parent %d breaks breadth-first order", i, n.Parent)
		}
		prev = n.Parent
		p := t.Nodes[n.Parent]
		if n.Depth != p.Depth+1 {
			return fmt.Errorf("node %d: depth %d under parent depth %d", i, n.Depth, p.Depth)
		}
		if int32(i) < p.FirstChild || int32(i) >= p.FirstChild+p.Children {
			return fmt.Errorf("node %d: outside its parent's child range", i)
		}
	}
	return nil
}

// Canonical builds a canonical tree from nodes given in any order as
// parallel slices (parents[i] < 0 marks the root, which must be unique), by
// a breadth-first walk that keeps siblings in input order. It returns the
// tree and perm, where perm[new] = old index.
func Canonical(tokens []int32, parents []int, probs []float64) (*Tree, []int, error) {
	n := len(tokens)
	if len(parents) != n || len(probs) != n || n == 0 {
		return nil, nil, fmt.Errorf("spec: Canonical: mismatched or empty input")
	}
	kids := make([][]int, n)
	root := -1
	for i, p := range parents {
		switch {
		case p < 0:
			if root >= 0 {
				return nil, nil, fmt.Errorf("spec: Canonical: two roots (%d and %d)", root, i)
			}
			root = i
		case p >= n:
			return nil, nil, fmt.Errorf("spec: Canonical: node %d has parent %d out of range", i, p)
		default:
			kids[p] = append(kids[p], i)
		}
	}
	if root < 0 {
		return nil, nil, fmt.Errorf("spec: Canonical: no root")
	}
	t := &Tree{}
	t.Reset(tokens[root])
	t.Nodes[0].Prob, t.Nodes[0].Raw = probs[root], probs[root]
	perm := []int{root}
	for q := 0; q < len(perm); q++ {
		for _, c := range kids[perm[q]] {
			t.Add(q, tokens[c], probs[c])
			perm = append(perm, c)
		}
	}
	if len(perm) != n {
		return nil, nil, fmt.Errorf("spec: Canonical: %d nodes unreachable from the root (a cycle)", n-len(perm))
	}
	return t, perm, nil
}
