// KeyedCount is the Flink side of 'weir bench''s Flink row: the counter
// example written as a Flink user would write it.
//
// It reads the bench's events (JSON lines, one file per source partition)
// with FileSource, parses each line and keys it by its "key" field, counts
// per key in a ValueState<Long> held by the RocksDB state backend, and
// writes "key,count" lines with FileSink, which commits its files at
// checkpoints: the output is exactly once. Checkpoints are exactly-once,
// incremental, to the local filesystem, every --checkpoint-ms.
//
// It runs the job --runs times in one JVM, each on a local cluster of its
// own, and prints one JSON line per run on stdout: the job's net runtime
// (JobExecutionResult.getNetRuntime: from the job's start to its end, the
// cluster's start excluded), the CPU time the JVM process used (all
// threads) from the job's submission to its result (a JobListener's two
// callbacks: the local cluster's start excluded). The first run pays the
// JIT's warm-up; a long-running Flink cluster has paid it.
//
// Usage: KeyedCount --input DIR --output DIR --state DIR
//        [--parallelism N] [--checkpoint-ms N] [--runs N]
// Each run writes to OUTPUT/run-<i> and keeps its state under STATE/run-<i>.

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.JobListener;
import org.apache.flink.core.fs.Path;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

public class KeyedCount {
    /** Counts per key; emits "key,count" for every input. */
    public static class Count extends KeyedProcessFunction<String, String, String> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
        }

        @Override
        public void processElement(String key, Context ctx, Collector<String> out) throws Exception {
            Long c = count.value();
            long n = (c == null ? 0 : c) + 1;
            count.update(n);
            out.collect(key + "," + n);
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    /** The event's "key" field; an event without one fails the job. */
    static String keyOf(String line) throws Exception {
        JsonNode key = JSON.readTree(line).get("key");
        if (key == null || !key.isTextual()) {
            throw new IllegalArgumentException("event without a string key: " + line);
        }
        return key.asText();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>();
        a.put("--parallelism", String.valueOf(Runtime.getRuntime().availableProcessors()));
        a.put("--checkpoint-ms", "1000");
        a.put("--runs", "1");
        for (int i = 0; i + 1 < args.length; i += 2) {
            a.put(args[i], args[i + 1]);
        }
        for (String req : new String[] {"--input", "--output", "--state"}) {
            if (!a.containsKey(req)) {
                System.err.println("KeyedCount: missing " + req);
                System.exit(2);
            }
        }
        int runs = Integer.parseInt(a.get("--runs"));
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        for (int run = 1; run <= runs; run++) {
            String state = a.get("--state") + "/run-" + run;
            Map<String, String> conf = new HashMap<>();
            conf.put("parallelism.default", a.get("--parallelism"));
            conf.put("state.backend.type", "rocksdb");
            conf.put("state.backend.rocksdb.localdir", state + "/rocksdb");
            conf.put("execution.checkpointing.storage", "filesystem");
            conf.put("execution.checkpointing.dir", "file://" + state + "/checkpoints");
            conf.put("execution.checkpointing.incremental", "true");
            conf.put("execution.checkpointing.mode", "EXACTLY_ONCE");
            conf.put("execution.checkpointing.interval", a.get("--checkpoint-ms") + " ms");
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));

            FileSource<String> source = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(a.get("--input"))).build();
            FileSink<String> sink = FileSink.forRowFormat(new Path(a.get("--output") + "/run-" + run), new SimpleStringEncoder<String>("UTF-8")).build();
            env.fromSource(source, WatermarkStrategy.noWatermarks(), "events")
                    .map(KeyedCount::keyOf).name("parse")
                    .keyBy(k -> k)
                    .process(new Count()).name("count")
                    .sinkTo(sink).name("counts");

            final long[] jobCpu = new long[2]; // at submission, at the result
            env.registerJobListener(new JobListener() {
                @Override
                public void onJobSubmitted(JobClient client, Throwable t) {
                    jobCpu[0] = os.getProcessCpuTime();
                }

                @Override
                public void onJobExecuted(JobExecutionResult result, Throwable t) {
                    jobCpu[1] = os.getProcessCpuTime();
                }
            });
            JobExecutionResult res = env.execute("weir-bench keyed count");
            System.out.printf("{\"run\":%d,\"net_runtime_ns\":%d,\"job_cpu_ns\":%d}%n",
                    run, res.getNetRuntime(TimeUnit.NANOSECONDS), jobCpu[1] - jobCpu[0]);
            System.out.flush();
        }
        System.exit(0); // the local cluster leaves non-daemon threads behind
    }
}
