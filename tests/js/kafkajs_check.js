// kafkajs against a replog cluster: topic offsets (ListOffsets) before and after a produce.
//
// Usage: node kafkajs_check.js <bootstrap host:port,...> <topic> <records per partition>
// Prints one JSON object on stdout:
//   {"before": [...], "produced": [...], "after": [...], "byTime": [...]}
// where "before"/"after" are admin.fetchTopicOffsets results, "produced" the producer's record
// metadata, "byTime" admin.fetchTopicOffsetsByTimestamp at the first record's time. kafkajs logs
// go to stderr. Consumers are not exercised: kafkajs consumes only in groups.
'use strict'

// Silence kafkajs 2's notice about its default partitioner (every message names its partition).
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, perPartitionText] = process.argv.slice(2)
const perPartition = Number(perPartitionText)
const baseTimestampMs = 1700000000000

const kafka = new Kafka({
  clientId: 'replog-kafkajs-check',
  brokers: bootstrap.split(','),
  logLevel: logLevel.WARN,
  logCreator: () => ({ level, log }) => {
    process.stderr.write(`kafkajs ${level} ${JSON.stringify(log)}\n`)
  },
  requestTimeout: 15000,
  retry: { retries: 3 }
})

const byPartition = (offsets) => offsets.slice().sort((a, b) => a.partition - b.partition)

async function main () {
  const admin = kafka.admin()
  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
  await admin.connect()
  await producer.connect()
  try {
    const before = byPartition(await admin.fetchTopicOffsets(topic))
    const messages = []
    for (const { partition } of before) {
      for (let i = 0; i < perPartition; i++) {
        messages.push({
          partition,
          key: `k${partition}-${i}`,
          value: `kafkajs-${partition}-${i}`,
          timestamp: String(baseTimestampMs + i)
        })
      }
    }
    const produced = await producer.send({ topic, acks: -1, messages })
    const after = byPartition(await admin.fetchTopicOffsets(topic))
    const byTime = byPartition(await admin.fetchTopicOffsetsByTimestamp(topic, baseTimestampMs + 1))
    process.stdout.write(JSON.stringify({ before, produced, after, byTime }) + '\n')
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
}

main().catch((error) => {
  process.stderr.write(`kafkajs check failed: ${error.stack || error}\n`)
  process.exit(1)
})
