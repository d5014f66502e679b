// One kafkajs consumer-group member, for tests/compat/test_group_clients.py (the same contract
// as tests/compat/group_member.py, which runs the Python clients).
//
// Usage: node kafkajs_group_member.js <bootstrap host:port,...> <group> <topic> <mode>
// mode: "drain:N" (read until N records, commit, disconnect, exit) or "member" (read and commit
// after every batch until a line "close" arrives on stdin, then disconnect). Reads from the
// earliest offset when the group has none; 4 s session timeout, 500 ms heartbeats. Prints JSON
// lines on stdout:
//   {"assigned": [[topic, partition], ...]}          whenever the assignment changes
//   {"records": [[partition, offset, value], ...]}   each batch read
//   {"committed": {"<partition>": offset, ...}}      after each commit (the next offsets)
//   {"closed": true}                                 after a clean disconnect
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, group, topic, mode] = process.argv.slice(2)
const want = mode.startsWith('drain:') ? Number(mode.split(':')[1]) : null

const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')

const kafka = new Kafka({
  clientId: 'kafkajs-member',
  brokers: bootstrap.split(','),
  logLevel: logLevel.WARN,
  logCreator: () => ({ level, log }) => {
    process.stderr.write(`kafkajs ${level} ${JSON.stringify(log)}\n`)
  },
  requestTimeout: 15000,
  retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 }
})

async function main () {
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 4000,
    heartbeatInterval: 500,
    rebalanceTimeout: 10000,
    // kafkajs heartbeats between fetches, not on a timer of its own: a fetch waiting the
    // default 5 s for data outlasts the 4 s session and the coordinator drops the member.
    maxWaitTimeInMs: 500,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 }
  })
  let seen = 0
  let closing = false
  let finished
  const done = new Promise((resolve) => { finished = resolve })
  const committed = {}

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const assigned = []
    for (const [name, partitions] of Object.entries(payload.memberAssignment)) {
      for (const partition of partitions) assigned.push([name, partition])
    }
    assigned.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1))
    emit({ assigned })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    process.stderr.write(`kafkajs crash: ${payload.error && payload.error.stack}\n`)
  })

  let input = null
  if (want === null) {
    input = readline.createInterface({ input: process.stdin })
    input.on('line', (line) => {
      if (line.trim() === 'close') { closing = true; finished() }
    }).on('close', () => { closing = true; finished() })
  }

  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (closing || batch.messages.length === 0) return
      const rows = batch.messages.map((m) => [batch.partition, Number(m.offset), m.value.toString()])
      emit({ records: rows })
      const last = Number(batch.messages[batch.messages.length - 1].offset)
      await consumer.commitOffsets([
        { topic: batch.topic, partition: batch.partition, offset: String(last + 1) }
      ])
      // Only what was committed: a batch whose commit failed (the consumer restarts after a
      // crash and reads it again) is not reported.
      committed[batch.partition] = last + 1
      emit({ committed: { ...committed } })
      seen += rows.length
      if (want !== null && seen >= want) finished()
    }
  })
  await done
  await consumer.disconnect()
  if (input !== null) input.close() // an open stdin would keep the process alive
  emit({ closed: true })
}

main().catch((error) => {
  process.stderr.write(`kafkajs member failed: ${error.stack || error}\n`)
  process.exit(1)
})
