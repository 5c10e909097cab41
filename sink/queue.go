package sink

// recordQueue is a partition's queued records, arr[head:], in one array: batches are taken
// from the front without moving the rest, and the array never outlives the records it was
// sized for by long (issue 26: at 256 partitions, arrays kept at their largest burst's size,
// two per partition, were most of eosink run's heap; copying a backlog's rest into a fresh
// array at each batch made a 12-partition run spend twice the CPU).
//
// The batch is the queue's own array when it takes every record queued (no copy), and the
// queue moves to the spare array or a new one sized for the batch (queueArray); otherwise
// its records are copied into an array of their own (at most MaxBatchRecords of them) and the
// rest stays where it is. push moves the records to the array's front when it is full and
// half of it is taken. So an array sized for a burst is let go once its burst has drained:
// the worker keeps a committed batch's array as its spare only up to keptCap.
type recordQueue struct {
	arr  []Record // arr[:head] taken (cleared), arr[head:] queued
	head int
}

func (q *recordQueue) len() int { return len(q.arr) - q.head }

// at is the i-th queued record.
func (q *recordQueue) at(i int) *Record { return &q.arr[q.head+i] }

func (q *recordQueue) push(r Record) {
	if len(q.arr) == cap(q.arr) && q.head > 0 && q.head >= len(q.arr)/2 {
		n := copy(q.arr, q.arr[q.head:])
		clear(q.arr[n:])
		q.arr, q.head = q.arr[:n], 0
	}
	q.arr = append(q.arr, r)
}

// take removes the first n records (0 < n <= len) and returns them, with the whole array
// they are in (arr[0] first: for settled to clear and keep as the spare). spare is the
// spare array, nil when none; used reports whether take took it.
func (q *recordQueue) take(n int, spare []Record) (batch, array []Record, used bool) {
	if n == q.len() {
		batch, array = q.arr[q.head:len(q.arr):len(q.arr)], q.arr
		q.arr, q.head = queueArray(spare, 0, n), 0
		return batch, array, spare != nil && cap(q.arr) > 0 && &q.arr[:1][0] == &spare[:1][0]
	}
	dst := queueArray(spare, 0, n)
	used = spare != nil && cap(dst) > 0 && &dst[:1][0] == &spare[:1][0]
	batch = append(dst, q.arr[q.head:q.head+n]...)
	clear(q.arr[q.head : q.head+n])
	q.head += n
	return batch, batch, used
}

// minQueueCap is the least capacity, in records, of a new queue or batch array (queueArray).
const minQueueCap = 8

// queueArray is an empty array for rest records and what arrives until the next batch forms
// (as many as the batch of n had, at this rate): spare (the last committed batch's array)
// when it holds that without being more than twice as large, else a new one. Arrays so
// follow each partition's rate down as well as up.
func queueArray(spare []Record, rest, n int) []Record {
	need := max(rest, n, minQueueCap)
	if spare != nil && cap(spare) >= need && cap(spare) <= 2*need {
		return spare[:0]
	}
	return make([]Record, 0, need)
}
