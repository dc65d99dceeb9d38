package ethrpc

import (
	"time"

	"github.com/ethstream/ethstream/stream"
)

// maxLearned bounds the learned times kept: one per planned batch end (and
// notified head) not yet committed.
const maxLearned = 4096

// learnedAt records, unless known already, when the source learned that
// block num was readable. Called with s.mu held.
func (s *Source) learnedAt(num uint64, t time.Time) {
	if s.mu.learned == nil {
		s.mu.learned = make(map[uint64]time.Time)
	}
	if _, ok := s.mu.learned[num]; ok {
		return
	}
	if len(s.mu.learned) >= maxLearned {
		for k := range s.mu.learned { // a runaway backlog: forget an arbitrary one
			delete(s.mu.learned, k)
			break
		}
	}
	s.mu.learned[num] = t
}

// noteNotified records a newHeads notification's arrival.
func (s *Source) noteNotified(num uint64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.learnedAt(num, t)
}

// noteLearned records that a planned batch end is readable (a poll that
// saw it before any notification did).
func (s *Source) noteLearned(end stream.Offset) {
	en, ok, err := ParseOffset(end)
	if err != nil || !ok {
		return
	}
	now := s.env.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.learnedAt(en.Block, now)
}

// noteCommitted sets the freshness of the batch ending at end and forgets
// the times of the blocks it covers.
func (s *Source) noteCommitted(end stream.Offset) {
	en, ok, err := ParseOffset(end)
	if err != nil || !ok {
		return
	}
	now := s.env.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.mu.learned[en.Block]; ok {
		s.mu.freshness, s.mu.freshSet = now.Sub(t), true
	}
	for k := range s.mu.learned {
		if k <= en.Block {
			delete(s.mu.learned, k)
		}
	}
}
