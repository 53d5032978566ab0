package histcache

import "fmt"

// State is a node's state in the cache. See the package doc.
type State uint8

// States. The numeric values are part of the snapshot format.
const (
	NotCandidate State = iota
	Empty
	Valid
	MustRefresh
	InBatchCompute
	numStates
)

var stateNames = [numStates]string{"NotCandidate", "Empty", "Valid", "MustRefresh", "InBatchCompute"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Event drives a State transition. See the package doc.
type Event uint8

// Events.
const (
	EventPush Event = iota
	EventEvict
	EventExpire
	EventMarkInBatch
	EventEndBatch
	EventPull
	numEvents
)

var eventNames = [numEvents]string{"Push", "Evict", "Expire", "MarkInBatch", "EndBatch", "Pull"}

func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

type edge struct {
	to State
	ok bool
}

// transitions is the table of the package doc.
var transitions = [numStates][numEvents]edge{
	NotCandidate: {
		EventMarkInBatch: {NotCandidate, true},
		EventEndBatch:    {NotCandidate, true},
	},
	Empty: {
		EventPush:        {Valid, true},
		EventEvict:       {Empty, true},
		EventMarkInBatch: {Empty, true},
		EventEndBatch:    {Empty, true},
	},
	Valid: {
		EventPush:        {Valid, true},
		EventEvict:       {MustRefresh, true},
		EventExpire:      {MustRefresh, true},
		EventMarkInBatch: {InBatchCompute, true},
		EventEndBatch:    {Valid, true},
		EventPull:        {Valid, true},
	},
	MustRefresh: {
		EventPush:        {Valid, true},
		EventEvict:       {MustRefresh, true},
		EventMarkInBatch: {MustRefresh, true},
		EventEndBatch:    {MustRefresh, true},
	},
	InBatchCompute: {
		EventPush:        {InBatchCompute, true},
		EventEvict:       {MustRefresh, true},
		EventMarkInBatch: {InBatchCompute, true},
		EventEndBatch:    {Valid, true},
	},
}

// Transition returns the state that event e leads s to, or an error
// wrapping ErrTransition when the table rejects the pair.
func Transition(s State, e Event) (State, error) {
	if s >= numStates || e >= numEvents || !transitions[s][e].ok {
		return s, fmt.Errorf("%w: %v on %v", ErrTransition, e, s)
	}
	return transitions[s][e].to, nil
}
