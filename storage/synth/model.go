package synth

import (
	"math"
	"math/bits"

	"github.com/ssdgnn/ssdgnn/internal/splitmix"
)

// Stream constants separate the random streams derived from one seed.
const (
	streamPerm     = 0x243f6a8885a308d3
	streamEdges    = 0x13198a2e03707344
	streamFeatures = 0xa4093822299f31d0
	streamCentroid = 0x082efa98ec4e6c89
	streamSplits   = 0x452821e638d01377
)

// mix64 is a bijective 64-bit finaliser (the splitmix64 output function).
func mix64(z uint64) uint64 { return splitmix.Finalize(z) }

// hash3 hashes a seed, a stream constant and an index.
func hash3(seed, stream, i uint64) uint64 {
	return mix64(mix64(seed^stream) + i*0x9e3779b97f4a7c15)
}

// rng is a splitmix64 generator: a counter passed through mix64. It is
// tiny, so every node gets its own, seeded from (seed, stream, node).
type rng struct{ s uint64 }

func newRNG(seed, stream, i uint64) rng { return rng{hash3(seed, stream, i)} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) * (1.0 / (1 << 53)) }

// below returns a uniform value in [0, n) (bias at most n/2^64).
func (r *rng) below(n uint64) uint64 {
	hi, _ := bits.Mul64(r.next(), n)
	return hi
}

// normalScale normalises a Binomial(48, 1/2) plus Uniform(-1/2, 1/2)
// variable, whose variance is 12 + 1/12, to unit variance.
var normalScale = 1 / math.Sqrt(12+1.0/12)

// normal maps 64 random bits to an approximately standard normal value:
// the number of set bits among the top 48 (binomial, mean 24) smoothed by
// a uniform fraction from the low 16 bits. Mean 0, variance 1, excess
// kurtosis -0.04, support ±6.9. It uses integer arithmetic and exact IEEE
// operations only, so it is bit-reproducible on every platform, and costs
// a few nanoseconds.
func normal(x uint64) float64 {
	pc := bits.OnesCount64(x >> 16)
	u := (float64(x&0xffff) + 0.5) * (1.0 / 65536)
	return (float64(pc) - 24.5 + u) * normalScale
}

// perm is a seeded bijection on [0, n): a 4-round balanced Feistel network
// on the smallest even number of bits covering n, restricted to [0, n) by
// cycle walking. The domain is less than 4n, so a walk takes fewer than 4
// steps on average. O(1) memory.
type perm struct {
	n    uint64
	half uint
	mask uint64
	keys [4]uint64
}

func newPerm(n, seed uint64) perm {
	b := uint(bits.Len64(n - 1))
	b += b & 1
	if b < 2 {
		b = 2
	}
	p := perm{n: n, half: b / 2, mask: 1<<(b/2) - 1}
	for i := range p.keys {
		p.keys[i] = hash3(seed, streamPerm, uint64(i))
	}
	return p
}

func (p *perm) f(r uint64, i int) uint64 { return mix64(r^p.keys[i]) & p.mask }

func (p *perm) enc(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := 0; i < 4; i++ {
		l, r = r, l^p.f(r, i)
	}
	return l<<p.half | r
}

func (p *perm) dec(y uint64) uint64 {
	l, r := y>>p.half, y&p.mask
	for i := 3; i >= 0; i-- {
		l, r = r^p.f(l, i), l
	}
	return l<<p.half | r
}

// at returns π(x) for x in [0, n).
func (p *perm) at(x uint64) uint64 {
	for {
		x = p.enc(x)
		if x < p.n {
			return x
		}
	}
}

// inv returns π⁻¹(y) for y in [0, n).
func (p *perm) inv(y uint64) uint64 {
	for {
		y = p.dec(y)
		if y < p.n {
			return y
		}
	}
}

// model holds the closed-form parameters of the generator. It is
// immutable after newModel and shared by all workers.
type model struct {
	cfg     Config // with defaults
	seed    uint64
	n       uint64
	comm    uint64 // C
	classes uint64
	perm    perm

	// Degree weights: θ_k = ((k+2)^β − (k+1)^β)/β for rank k, β = 1 − 1/(γ−1).
	beta, invBeta float64
	intInvBeta    int     // invBeta when it is a small integer (γ = 2.5 gives 3), else 0
	nLo           uint64  // smallest community size, floor(N/C)
	rem           uint64  // communities c < rem have nLo+1 members
	aLo, aHi      float64 // (n+1)^β − 1 for n = nLo, nLo+1
	ranks         uint64  // ranks present in some community: ceil(N/C)
	aRanks        float64
	stubScale     float64 // expected out-stubs of a node = stubScale·θ
	homophily     float64
	noise         float32 // per-dimension noise std after normalisation
	signal        float32 // per-dimension signal after normalisation
}

func newModel(c Config) *model {
	m := &model{
		cfg:       c,
		seed:      uint64(c.Seed),
		n:         uint64(c.Nodes),
		comm:      uint64(c.Communities),
		classes:   uint64(c.Classes),
		homophily: c.Homophily,
	}
	m.perm = newPerm(m.n, m.seed)
	m.beta = 1 - 1/(c.DegreeExp-1)
	m.invBeta = 1 / m.beta
	if ib := math.Round(m.invBeta); math.Abs(ib-m.invBeta) < 1e-9 && ib >= 1 && ib <= 8 {
		m.intInvBeta = int(ib)
	}
	m.nLo, m.rem = m.n/m.comm, m.n%m.comm
	m.aLo, m.aHi = m.mass(m.nLo), m.mass(m.nLo+1)
	m.ranks = m.nLo
	m.aRanks = m.aLo
	if m.rem > 0 {
		m.ranks, m.aRanks = m.nLo+1, m.aHi
	}
	// Σθ over all nodes = (rem·aHi + (C−rem)·aLo)/β; mean θ = that / N.
	meanTheta := (float64(m.rem)*m.aHi + float64(m.comm-m.rem)*m.aLo) / m.beta / float64(m.n)
	// Each out-stub adds one to the degree of both endpoints, and in-stubs
	// land ∝ θ, so out-stubs with mean (AvgDegree/2)·θ/θ̄ give expected
	// degree AvgDegree·θ/θ̄.
	m.stubScale = c.AvgDegree / 2 / meanTheta
	norm := 1 / math.Sqrt(1+c.FeatNoise*c.FeatNoise)
	m.signal = float32(norm)
	m.noise = float32(c.FeatNoise * norm)
	return m
}

// mass is (n+1)^β − 1, β times the total weight of ranks [0, n).
func (m *model) mass(n uint64) float64 { return math.Pow(float64(n)+1, m.beta) - 1 }

// theta is the degree weight of rank k.
func (m *model) theta(k uint64) float64 {
	x := float64(k) + 1
	return (math.Pow(x+1, m.beta) - math.Pow(x, m.beta)) / m.beta
}

// sampleRank draws a rank in [0, n) with probability ∝ θ_k by inverting
// the continuous CDF ((x+1)^β − 1)/a, a = mass(n); the floor of the
// continuous draw has exactly the discrete weights θ_k.
func (m *model) sampleRank(r *rng, n uint64, a float64) uint64 {
	t := 1 + r.float64()*a
	var x float64
	if m.intInvBeta > 0 {
		x = t
		for i := 1; i < m.intInvBeta; i++ {
			x *= t
		}
	} else {
		x = math.Pow(t, m.invBeta)
	}
	x--
	k := uint64(x)
	if k >= n {
		k = n - 1
	}
	return k
}

// community returns the community and rank of node v: π(v) = rank·C + community.
func (m *model) community(v uint64) (c, k uint64) {
	p := m.perm.at(v)
	return p % m.comm, p / m.comm
}

// label of node v.
func (m *model) label(v uint64) int32 {
	c, _ := m.community(v)
	return int32(c % m.classes)
}

// size of community c.
func (m *model) size(c uint64) (uint64, float64) {
	if c < m.rem {
		return m.nLo + 1, m.aHi
	}
	return m.nLo, m.aLo
}

// endpoint draws the far end of an out-stub of a node in community cu:
// with probability Homophily a member of cu, else a member of another
// community, in both cases with probability ∝ θ.
func (m *model) endpoint(r *rng, cu uint64) uint64 {
	if r.float64() < m.homophily {
		n, a := m.size(cu)
		k := m.sampleRank(r, n, a)
		return m.perm.inv(k*m.comm + cu)
	}
	for {
		k := m.sampleRank(r, m.ranks, m.aRanks)
		c := r.below(m.comm)
		if c == cu {
			continue
		}
		if p := k*m.comm + c; p < m.n {
			return m.perm.inv(p)
		}
	}
}

// stubs returns the number of out-stubs of a node of rank k: the expected
// count rounded up or down at random, so the mean is exact.
func (m *model) stubs(r *rng, k uint64) int {
	e := m.stubScale * m.theta(k)
	s := math.Floor(e)
	if r.float64() < e-s {
		s++
	}
	return int(s)
}
