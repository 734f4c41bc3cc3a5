package beamsparkrunner.ui;

import jakarta.servlet.http.HttpServletRequest;
import java.lang.reflect.Method;
import org.apache.spark.ui.UIUtils;
import org.apache.spark.ui.WebUIPage;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.xml.Node;
import scala.xml.XML;

/** The page of {@link BeamTab}: its last table, in Spark's page frame. */
final class WatermarksPage extends WebUIPage {
  private final BeamTab tab;

  WatermarksPage(BeamTab tab) {
    super("");
    this.tab = tab;
  }

  @Override
  public Seq<Node> render(HttpServletRequest request) {
    Seq<Node> content = nodes(html(tab.table()));
    scala.Function0<Seq<Node>> body = () -> content;
    return frame(request, body);
  }

  /**
   * Spark's page frame around {@code body}. {@code UIUtils.headerSparkPage} takes two flags after
   * the help text in Spark 4.0 and 4.1 and three from 4.2: it is called by reflection, every flag
   * false, so that one jar serves every supported Spark.
   */
  @SuppressWarnings("unchecked")
  private Seq<Node> frame(HttpServletRequest request, scala.Function0<Seq<Node>> body) {
    for (Method method : UIUtils.class.getMethods()) {
      if (!method.getName().equals("headerSparkPage") || method.getParameterCount() < 5) {
        continue;
      }
      Object[] args = new Object[method.getParameterCount()];
      args[0] = request;
      args[1] = "Beam";
      args[2] = body;
      args[3] = tab;
      args[4] = Option.empty();
      for (int i = 5; i < args.length; i++) {
        if (method.getParameterTypes()[i] != boolean.class) {
          throw new IllegalStateException("unexpected UIUtils.headerSparkPage signature: " + method);
        }
        args[i] = false;
      }
      try {
        return (Seq<Node>) method.invoke(null, args);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("UIUtils.headerSparkPage failed", e);
      }
    }
    throw new IllegalStateException("this Spark has no UIUtils.headerSparkPage");
  }

  static String html(BeamTab.Table table) {
    StringBuilder out = new StringBuilder("<div id=\"beam-watermarks\"><p id=\"beam-caption\">");
    out.append(escape(table.caption)).append("</p>");
    if (table.columns.length > 0) {
      out.append("<table class=\"table table-bordered table-sm table-striped\" id=\"beam-stages\"><thead><tr>");
      for (String column : table.columns) {
        out.append("<th>").append(escape(column)).append("</th>");
      }
      out.append("</tr></thead><tbody>");
      for (String[] row : table.rows) {
        out.append("<tr>");
        for (String cell : row) {
          out.append("<td>").append(escape(cell)).append("</td>");
        }
        out.append("</tr>");
      }
      out.append("</tbody></table>");
    }
    return out.append("</div>").toString();
  }

  @SuppressWarnings("unchecked")
  private static Seq<Node> nodes(String html) {
    // An Elem is a NodeSeq, which is an immutable Seq of Nodes.
    return (Seq<Node>) (Object) XML.loadString(html);
  }

  private static String escape(String text) {
    StringBuilder out = new StringBuilder(text.length());
    for (char c : text.toCharArray()) {
      switch (c) {
        case '<':
          out.append("&lt;");
          break;
        case '>':
          out.append("&gt;");
          break;
        case '&':
          out.append("&amp;");
          break;
        case '"':
          out.append("&quot;");
          break;
        default:
          out.append(c);
      }
    }
    return out.toString();
  }
}
