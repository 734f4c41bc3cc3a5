package org.example;

import java.util.Map;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.io.kafka.KafkaIO;
import org.apache.beam.sdk.options.Description;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.options.StreamingOptions;
import org.apache.beam.sdk.options.Validation;
import org.apache.beam.sdk.transforms.ParDo;
import org.apache.beam.sdk.transforms.windowing.FixedWindows;
import org.apache.beam.sdk.transforms.windowing.Window;
import org.apache.beam.sdk.values.KV;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.joda.time.Duration;

/**
 * A streaming Beam Java pipeline reading Kafka: Beam Java's {@link KafkaIO}
 * reads {@code --topic} at {@code --bootstrapServers} from its beginning,
 * each message timestamped by its create time; messages are counted per key
 * in 10-second windows by {@link TickCounts.CountAndWrite} (a stateful DoFn
 * whose event-time timer writes each count to {@code <output>/<key>-<window
 * start millis>.txt}). Run with {@code --streaming}; it runs until cancelled
 * (the job service's Cancel, e.g. {@code beam-spark-job-server}'s).
 */
public final class KafkaCounts {
  private KafkaCounts() {}

  /** The pipeline's options. */
  public interface Options extends StreamingOptions {
    @Description("Kafka's bootstrap servers, host:port[,host:port]")
    @Validation.Required
    String getBootstrapServers();

    void setBootstrapServers(String value);

    @Description("The topic to count")
    @Validation.Required
    String getTopic();

    void setTopic(String value);

    @Description("The directory the counts are written to")
    @Validation.Required
    String getOutput();

    void setOutput(String value);
  }

  public static void main(String[] args) {
    Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(Options.class);
    Pipeline p = Pipeline.create(options);
    p.apply(
            "Read",
            KafkaIO.<String, String>read()
                .withBootstrapServers(options.getBootstrapServers())
                .withTopic(options.getTopic())
                .withKeyDeserializer(StringDeserializer.class)
                .withValueDeserializer(StringDeserializer.class)
                .withConsumerConfigUpdates(Map.of("auto.offset.reset", "earliest"))
                .withCreateTime(Duration.ZERO)
                .withoutMetadata())
        .apply(Window.<KV<String, String>>into(FixedWindows.of(Duration.standardSeconds(10))))
        .apply("Count", ParDo.of(new TickCounts.CountAndWrite(options.getOutput())));
    p.run().waitUntilFinish();
  }
}
