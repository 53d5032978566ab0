//go:build linux

// Package uring is the smallest io_uring that ssdgnn needs: one ring that
// queues reads and submits a batch of them in one io_uring_enter system
// call. It uses the raw system calls (golang.org/x/sys/unix), because the
// maintained Go bindings (giouring, iouring-go, go-uring) could not be
// fetched from this project's module proxy; see docs/ooc.md.
//
// Invariants and caveats:
//   - A Ring is not safe for concurrent use: one goroutine owns it between
//     New and Close.
//   - The buffers of queued reads belong to the kernel until their
//     completion is reaped: the caller keeps them alive and untouched.
//   - At most Entries() reads may be in flight (queued or submitted and
//     not reaped), so the completion queue (twice as large) cannot
//     overflow.
//   - New fails with a wrapped ErrUnsupported where the kernel refuses
//     io_uring (ENOSYS, EPERM from kernel.io_uring_disabled or a seccomp
//     filter); callers fall back to pread.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is wrapped by New where the kernel refuses io_uring.
var ErrUnsupported = errors.New("uring: io_uring unavailable")

// Kernel ABI (include/uapi/linux/io_uring.h).
const (
	opRead         = 22 // IORING_OP_READ, Linux 5.6
	enterGetEvents = 1  // IORING_ENTER_GETEVENTS
	featSingleMmap = 1  // IORING_FEAT_SINGLE_MMAP
	offSQRing      = 0
	offCQRing      = 0x8000000
	offSQEs        = 0x10000000
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad2        uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Ring is one io_uring instance.
type Ring struct {
	fd               int
	sqMem, cqMem     []byte
	sqesMem          []byte
	sqHead, sqTail   *uint32
	sqMask           uint32
	sqArray          []uint32
	sqes             []sqe
	cqHead, cqTail   *uint32
	cqMask           uint32
	cqes             []cqe
	entries          uint32
	queued, inFlight uint32 // queued: prepared, not submitted; inFlight: submitted, not reaped
	tail             uint32 // local SQ tail
}

// New sets up a ring of entries submission slots (rounded up to a power
// of two by the kernel).
func New(entries uint32) (*Ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM || errno == unix.EACCES {
			return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("uring: io_uring_setup(%d): %w", entries, errno)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap(p *params) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	single := p.features&featSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("uring: mmap SQ ring (%d bytes): %w", sqSize, err)
	}
	if single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("uring: mmap CQ ring (%d bytes): %w", cqSize, err)
	}
	sqesSize := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	if r.sqesMem, err = unix.Mmap(r.fd, offSQEs, sqesSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("uring: mmap SQEs (%d bytes): %w", sqesSize, err)
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead, r.sqTail = u32(r.sqMem, p.sqOff.head), u32(r.sqMem, p.sqOff.tail)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqesMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = u32(r.cqMem, p.cqOff.head), u32(r.cqMem, p.cqOff.tail)
	r.cqMask = *u32(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// Entries is the number of reads that may be in flight at once.
func (r *Ring) Entries() int { return int(r.entries) }

// InFlight is the number of reads queued or submitted and not yet reaped.
func (r *Ring) InFlight() int { return int(r.queued + r.inFlight) }

// PrepRead queues a read of len(buf) bytes of fd at off, to be submitted
// by the next Submit. It reports false when Entries() reads are already in
// flight.
func (r *Ring) PrepRead(fd int, buf []byte, off int64, userData uint64) bool {
	if r.queued+r.inFlight >= r.entries || len(buf) == 0 {
		return false
	}
	idx := r.tail & r.sqMask
	r.sqes[idx] = sqe{opcode: opRead, fd: int32(fd), off: uint64(off),
		addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf)), userData: userData}
	r.sqArray[idx] = idx
	r.tail++
	r.queued++
	return true
}

// Submit hands every queued read to the kernel in one io_uring_enter call
// (more only if the kernel takes fewer) and, when wait > 0, blocks until
// at least min(wait, reads in flight) completions are available.
func (r *Ring) Submit(wait int) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	for {
		var flags, minComplete uintptr
		if wait > 0 {
			flags, minComplete = enterGetEvents, uintptr(min(uint32(wait), r.queued+r.inFlight))
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.queued), minComplete, flags, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 && errno != unix.EAGAIN && errno != unix.EBUSY {
			return fmt.Errorf("uring: io_uring_enter: %w", errno)
		}
		r.queued -= uint32(n)
		r.inFlight += uint32(n)
		if r.queued == 0 {
			return nil
		}
		if errno != 0 { // out of resources: let completions drain first
			wait = max(wait, 1)
		}
	}
}

// Reap calls fn for every completion available now and returns how many
// it reaped. res is the read's byte count, or a negated errno.
func (r *Ring) Reap(fn func(userData uint64, res int32)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		atomic.StoreUint32(r.cqHead, head+1)
		r.inFlight--
		n++
		fn(c.userData, c.res)
	}
	return n
}

// Wait blocks until at least one completion is available.
func (r *Ring) Wait() error {
	for {
		if atomic.LoadUint32(r.cqHead) != atomic.LoadUint32(r.cqTail) {
			return nil
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, enterGetEvents, 0, 0)
		if errno != 0 && errno != unix.EINTR {
			return fmt.Errorf("uring: io_uring_enter wait: %w", errno)
		}
	}
}

// Close waits for reads in flight, then unmaps the rings and closes the
// ring's file descriptor.
func (r *Ring) Close() error {
	for r.inFlight > 0 && r.sqTail != nil {
		if r.Wait() != nil {
			break
		}
		r.Reap(func(uint64, int32) {})
	}
	if r.sqesMem != nil {
		unix.Munmap(r.sqesMem)
	}
	if r.cqMem != nil && (r.sqMem == nil || &r.cqMem[0] != &r.sqMem[0]) {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	return unix.Close(r.fd)
}
