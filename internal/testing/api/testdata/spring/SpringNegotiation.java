// SpringNegotiation asks Spring MVC 4.3 itself what Leaf's server does with
// an Accept header, for TestNegotiationAgainstSpring (spring_test.go): for
// each argument it prints, tab-separated, the header, the Content-Type
// Spring's RequestResponseBodyMethodProcessor gives a String controller
// result (Leaf's ID) with Spring Boot 1.5's converters, or "406", and
// "html" or "json": which of Spring Boot's BasicErrorController mappings
// (produces="text/html" or none) its ProducesRequestCondition picks.
// Classpath: Debian's libspring-web-servlet-java and libspring-test-java
// (Spring 4.3.30, as in the recording), Jackson, the servlet API.
import java.lang.reflect.Method;
import java.nio.charset.Charset;
import java.util.ArrayList;
import java.util.List;
import org.springframework.core.MethodParameter;
import org.springframework.http.converter.ByteArrayHttpMessageConverter;
import org.springframework.http.converter.HttpMessageConverter;
import org.springframework.http.converter.ResourceHttpMessageConverter;
import org.springframework.http.converter.StringHttpMessageConverter;
import org.springframework.http.converter.json.MappingJackson2HttpMessageConverter;
import org.springframework.http.converter.support.AllEncompassingFormHttpMessageConverter;
import org.springframework.http.converter.xml.SourceHttpMessageConverter;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.web.HttpMediaTypeNotAcceptableException;
import org.springframework.web.accept.ContentNegotiationManager;
import org.springframework.web.accept.HeaderContentNegotiationStrategy;
import org.springframework.web.context.request.ServletWebRequest;
import org.springframework.web.method.support.ModelAndViewContainer;
import org.springframework.web.servlet.mvc.condition.ProducesRequestCondition;
import org.springframework.web.servlet.mvc.method.annotation.RequestResponseBodyMethodProcessor;

public class SpringNegotiation {
    /** Leaf's controller method: a String. */
    public String id() {
        return "11";
    }

    public static void main(String[] args) throws Exception {
        // Spring Boot 1.5's converters, in its order: its UTF-8 String
        // converter (without Accept-Charset) in place of the default one.
        StringHttpMessageConverter str = new StringHttpMessageConverter(Charset.forName("UTF-8"));
        str.setWriteAcceptCharset(false);
        List<HttpMessageConverter<?>> converters = new ArrayList<>();
        converters.add(new ByteArrayHttpMessageConverter());
        converters.add(str);
        converters.add(new ResourceHttpMessageConverter());
        converters.add(new SourceHttpMessageConverter<>());
        converters.add(new AllEncompassingFormHttpMessageConverter());
        converters.add(new MappingJackson2HttpMessageConverter());
        ContentNegotiationManager manager = new ContentNegotiationManager(new HeaderContentNegotiationStrategy());
        RequestResponseBodyMethodProcessor processor = new RequestResponseBodyMethodProcessor(converters, manager);
        MethodParameter returnType = new MethodParameter(SpringNegotiation.class.getMethod("id"), -1);
        ProducesRequestCondition html = new ProducesRequestCondition("text/html");
        ProducesRequestCondition json = new ProducesRequestCondition();
        for (String accept : args) {
            MockHttpServletRequest req = new MockHttpServletRequest("GET", "/api/segment/get/leaf-segment-test");
            if (!accept.isEmpty()) {
                req.addHeader("Accept", accept);
            }
            MockHttpServletResponse resp = new MockHttpServletResponse();
            String type;
            try {
                processor.handleReturnValue("11", returnType, new ModelAndViewContainer(), new ServletWebRequest(req, resp));
                type = resp.getContentType();
            } catch (HttpMediaTypeNotAcceptableException e) {
                type = "406";
            }
            String page;
            ProducesRequestCondition h = html.getMatchingCondition(req);
            ProducesRequestCondition j = json.getMatchingCondition(req);
            if (h == null) {
                page = "json";
            } else if (j == null) {
                page = "html";
            } else {
                int c = h.compareTo(j, req);
                page = c < 0 ? "html" : c > 0 ? "json" : "tie";
            }
            System.out.println(accept + "\t" + type + "\t" + page);
        }
    }
}
