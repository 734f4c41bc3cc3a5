package beamsparkrunner.xlang;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.ServiceLoader;
import org.apache.beam.model.pipeline.v1.SchemaApi;
import org.apache.beam.sdk.coders.RowCoder;
import org.apache.beam.sdk.expansion.ExternalTransformRegistrar;
import org.apache.beam.sdk.schemas.Schema;
import org.apache.beam.sdk.schemas.SchemaTranslation;
import org.apache.beam.sdk.schemas.io.SchemaIO;
import org.apache.beam.sdk.schemas.io.SchemaIOProvider;
import org.apache.beam.sdk.transforms.ExternalTransformBuilder;
import org.apache.beam.sdk.transforms.PTransform;
import org.apache.beam.sdk.values.PBegin;
import org.apache.beam.sdk.values.PCollection;
import org.apache.beam.sdk.values.POutput;
import org.apache.beam.sdk.values.Row;

/**
 * Expands Beam's schema I/O transforms, as Python's {@code apache_beam.io.jdbc}
 * sends them: for each {@link SchemaIOProvider} on the classpath (JDBC's among
 * them), {@code beam:transform:org.apache.beam:schemaio_<id>_read:v1} and
 * {@code ..._write:v1}. Found by the expansion service through
 * {@link ServiceLoader} (META-INF/services).
 *
 * <p>The configuration is a {@code location} (the table), the provider's
 * configuration as an encoded row, and an optional data schema (a Schema
 * proto). The configuration row is decoded with the layout its field count
 * names: the provider's own, or a layout of the Python SDK that adds fields
 * ({@link #PYTHON_ADDED_FIELDS}); an added field that is set is refused,
 * naming it, since the provider cannot honour it.
 */
public final class SchemaIOTransforms implements ExternalTransformRegistrar {
  static final String URN_FORMAT = "beam:transform:org.apache.beam:schemaio_%s_%s:v1";

  /**
   * Fields newer Python SDKs add to a provider's configuration: provider id,
   * the field after which it comes, its name.
   */
  static final String[][] PYTHON_ADDED_FIELDS = {{"jdbc", "password", "secretManager"}};

  @Override
  public Map<String, ExternalTransformBuilder<?, ?, ?>> knownBuilderInstances() {
    Map<String, ExternalTransformBuilder<?, ?, ?>> builders = new HashMap<>();
    for (SchemaIOProvider provider : ServiceLoader.load(SchemaIOProvider.class)) {
      builders.put(String.format(URN_FORMAT, provider.identifier(), "read"), new Read(provider));
      builders.put(String.format(URN_FORMAT, provider.identifier(), "write"), new Write(provider));
    }
    return builders;
  }

  /** The configuration Python sends, populated through its setters. */
  public static final class Configuration {
    private String location = "";
    private byte[] config = new byte[0];
    private byte[] dataSchema;

    public void setLocation(String location) {
      this.location = location;
    }

    public void setConfig(byte[] config) {
      this.config = config;
    }

    public void setDataSchema(byte[] dataSchema) {
      this.dataSchema = dataSchema;
    }
  }

  static SchemaIO schemaIO(SchemaIOProvider provider, Configuration configuration) {
    Row config = decodeConfiguration(provider, configuration.config);
    Schema data = null;
    if (configuration.dataSchema != null && configuration.dataSchema.length > 0) {
      try {
        data = SchemaTranslation.schemaFromProto(SchemaApi.Schema.parseFrom(configuration.dataSchema));
      } catch (IOException e) {
        throw new IllegalArgumentException(provider.identifier() + ": unreadable data schema", e);
      }
    }
    return provider.from(configuration.location, config, data);
  }

  static Row decodeConfiguration(SchemaIOProvider provider, byte[] encoded) {
    Schema own = provider.configurationSchema();
    int fields = fieldCount(encoded);
    Schema layout = own;
    if (fields != own.getFieldCount()) {
      layout = withPythonFields(provider.identifier(), own);
      if (fields != layout.getFieldCount()) {
        throw new IllegalArgumentException(
            provider.identifier() + ": the configuration has " + fields + " fields; this expansion service"
                + " reads " + own.getFieldCount() + " or " + layout.getFieldCount());
      }
    }
    Row row;
    try {
      row = RowCoder.of(layout).decode(new ByteArrayInputStream(encoded));
    } catch (IOException e) {
      throw new IllegalArgumentException(provider.identifier() + ": unreadable configuration", e);
    }
    if (layout == own) {
      return row;
    }
    Row.Builder values = Row.withSchema(own);
    for (Schema.Field field : layout.getFields()) {
      if (own.hasField(field.getName())) {
        values.addValue(row.getValue(field.getName()));
      } else if (row.getValue(field.getName()) != null) {
        throw new IllegalArgumentException(
            provider.identifier() + ": option '" + field.getName() + "' is not supported by the runner's"
                + " expansion service");
      }
    }
    return values.build();
  }

  private static int fieldCount(byte[] encoded) {
    int value = 0;
    for (int i = 0, shift = 0; i < encoded.length && i < 5; i++, shift += 7) {
      value |= (encoded[i] & 0x7f) << shift;
      if ((encoded[i] & 0x80) == 0) {
        return value;
      }
    }
    throw new IllegalArgumentException("configuration row: bad field count");
  }

  private static Schema withPythonFields(String provider, Schema own) {
    Schema.Builder builder = Schema.builder();
    for (Schema.Field field : own.getFields()) {
      builder.addField(field);
      for (String[] added : PYTHON_ADDED_FIELDS) {
        if (added[0].equals(provider) && added[1].equals(field.getName())) {
          builder.addNullableField(added[2], Schema.FieldType.STRING);
        }
      }
    }
    return builder.build();
  }

  /** A provider's reader. */
  public static final class Read implements ExternalTransformBuilder<Configuration, PBegin, PCollection<Row>> {
    private final SchemaIOProvider provider;

    Read(SchemaIOProvider provider) {
      this.provider = provider;
    }

    @Override
    public PTransform<PBegin, PCollection<Row>> buildExternal(Configuration configuration) {
      return schemaIO(provider, configuration).buildReader();
    }
  }

  /** A provider's writer. */
  public static final class Write implements ExternalTransformBuilder<Configuration, PCollection<Row>, POutput> {
    private final SchemaIOProvider provider;

    Write(SchemaIOProvider provider) {
      this.provider = provider;
    }

    @Override
    @SuppressWarnings("unchecked")
    public PTransform<PCollection<Row>, POutput> buildExternal(Configuration configuration) {
      return (PTransform<PCollection<Row>, POutput>) schemaIO(provider, configuration).buildWriter();
    }
  }
}
