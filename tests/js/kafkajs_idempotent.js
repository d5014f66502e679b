// kafkajs's idempotent producer against a replog cluster: InitProducerId, then produces that
// carry a producer id and sequence numbers.
//
// Usage: node kafkajs_idempotent.js <bootstrap host:port,...> <topic> <partitions> <per partition>
// Sends <per partition> records to each partition in separate sends (so sequences advance
// across requests) and prints one JSON object on stdout: {"produced": [...record metadata]}.
// kafkajs logs go to stderr.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, partitionsText, perPartitionText] = process.argv.slice(2)
const partitions = Number(partitionsText)
const perPartition = Number(perPartitionText)

const kafka = new Kafka({
  clientId: 'replog-kafkajs-idempotent',
  brokers: bootstrap.split(','),
  logLevel: logLevel.WARN,
  logCreator: () => ({ level, log }) => {
    process.stderr.write(`kafkajs ${level} ${JSON.stringify(log)}\n`)
  },
  requestTimeout: 15000
})

async function main () {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false
  })
  await producer.connect()
  try {
    const produced = []
    for (let i = 0; i < perPartition; i += 5) {
      const messages = []
      for (let partition = 0; partition < partitions; partition++) {
        for (let j = i; j < Math.min(i + 5, perPartition); j++) {
          messages.push({ partition, key: `k${partition}-${j}`, value: `kafkajs-idem-${partition}-${j}` })
        }
      }
      produced.push(...await producer.send({ topic, acks: -1, messages }))
    }
    process.stdout.write(JSON.stringify({ produced }) + '\n')
  } finally {
    await producer.disconnect()
  }
}

main().catch((error) => {
  process.stderr.write(`kafkajs idempotent check failed: ${error.stack || error}\n`)
  process.exit(1)
})
